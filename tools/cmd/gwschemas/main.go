// Command gwschemas regenerates the strict JSON schemas under
// deploy/schemas from their upstream sources (see deploy/schemas/README.md
// for the exact files, versions and checksums):
//
//	(cd tools && go build -o ../bin/tools/ ./cmd/gwschemas)
//	bin/tools/gwschemas --swagger swagger.json \
//	    --crd keda.sh_scaledobjects.yaml=v1alpha1 \
//	    --crd serving.kserve.io_servingruntimes.yaml=v1alpha1 \
//	    --crd serving.kserve.io_inferenceservices.yaml=v1beta1 \
//	    --out deploy/schemas
//
// The sources are read from local files (paths relative to the working
// directory): nothing is downloaded.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/gr00tgw/gr00tgw/tools/deploycheck"
)

type crdFlags []deploycheck.CRDSource

func (c *crdFlags) String() string { return fmt.Sprint(*c) }
func (c *crdFlags) Set(v string) error {
	path, version, ok := strings.Cut(v, "=")
	if !ok || path == "" || version == "" {
		return fmt.Errorf("want FILE=VERSION, got %q", v)
	}
	*c = append(*c, deploycheck.CRDSource{Path: path, Version: version})
	return nil
}

func main() {
	swagger := flag.String("swagger", "", "Kubernetes swagger.json (OpenAPI v2) of the target release")
	out := flag.String("out", "deploy/schemas", "output directory")
	var crds crdFlags
	flag.Var(&crds, "crd", "CustomResourceDefinition YAML and the version to extract, FILE=VERSION (repeatable)")
	flag.Parse()
	if *swagger == "" {
		fmt.Fprintln(os.Stderr, "gwschemas: --swagger is required")
		os.Exit(2)
	}
	b, err := os.ReadFile(*swagger)
	if err == nil {
		var paths []string
		paths, err = deploycheck.WriteSchemas(*out, b, crds)
		for _, p := range paths {
			fmt.Println("wrote", p)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gwschemas:", err)
		os.Exit(1)
	}
}
