// Command gwchart renders and checks the Helm chart offline (package
// tools/deploycheck; make manifests, make check-deploy):
//
//	cd tools && go run ./cmd/gwchart render   # rewrite deploy/k8s/<set>.yaml for every value set
//	cd tools && go run ./cmd/gwchart check    # helm lint --strict, render, validate against
//	                                          # deploy/schemas, compare with deploy/k8s
//
// Run it anywhere in the checkout: it works on the directory holding the
// server module's go.mod (tools/internal/repo).
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gr00tgw/gr00tgw/tools/deploycheck"
	"github.com/gr00tgw/gr00tgw/tools/internal/repo"
)

func main() {
	if len(os.Args) != 2 || (os.Args[1] != "render" && os.Args[1] != "check") {
		fmt.Fprintln(os.Stderr, "usage: gwchart render|check")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gwchart:", err)
		os.Exit(1)
	}
}

func run(cmd string) error {
	root, err := repo.Root()
	if err != nil {
		return err
	}
	if cmd == "render" {
		paths, err := deploycheck.WriteManifests(root)
		for _, p := range paths {
			fmt.Println("wrote", p)
		}
		return err
	}
	if err := deploycheck.Lint(root); err != nil {
		return err
	}
	fmt.Println("helm lint --strict: ok for", len(deploycheck.ValueSets), "value sets")
	rs, err := deploycheck.RenderAll(root)
	if err != nil {
		return err
	}
	v := deploycheck.NewValidator(filepath.Join(root, deploycheck.SchemaDir))
	var errs []error
	for _, r := range rs {
		n := 0
		for _, o := range r.Objects {
			if err := v.Validate(o.Object); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", r.Set.Name, o.Name(), err))
				continue
			}
			n++
		}
		committed, err := os.ReadFile(filepath.Join(root, deploycheck.ManifestPath(r.Set)))
		if err != nil || !bytes.Equal(committed, r.Manifest) {
			errs = append(errs, fmt.Errorf("%s differs from the chart's rendering: run make manifests", deploycheck.ManifestPath(r.Set)))
		}
		fmt.Printf("%-12s %d objects valid against %s (Kubernetes %s)\n", r.Set.Name, n, deploycheck.SchemaDir, deploycheck.KubeVersion)
	}
	return errors.Join(errs...)
}
