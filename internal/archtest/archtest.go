// Package archtest holds the import rules of the tree (../shared/
// architecture.md, "Packages and who may import whom", as amended by issue
// 26) and checks an import graph against them. Its test runs the check on
// the module's own graph (`go list`), so a change that breaks a dependency
// direction fails `make test`, naming the import; another holds
// RATIONALE.md's "Who may import whom" table to Rules, so a rule added here
// is a row added there.
package archtest

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the module path every rule is relative to.
const Module = "github.com/gr00tgw/gr00tgw"

// Rule says which module packages the packages under Prefix may import
// (by prefix; a package may always import below its own prefix). All
// means anything.
type Rule struct {
	Prefix string
	May    []string
	All    bool
	Why    string
}

// Rules are the directions of architecture.md, most specific first.
var Rules = []Rule{
	{Prefix: "cmd", All: true, Why: "the binary wires everything"},
	{Prefix: "internal/inputsdir", May: []string{"core", "device"}, Why: "reads encoded model inputs for gr00tgw run and the benchmarks"},
	{Prefix: "internal", Why: "shared leaves (freelist, benchcpu, archtest); the build tools are their own module, tools/"},
	{Prefix: "assets", Why: "finds the embedded default; a leaf"},
	{Prefix: "config", Why: "configuration knows no other package"},
	{Prefix: "core", May: []string{"internal/freelist"}, Why: "core knows nothing of HTTP, plugins or devices"},
	{Prefix: "kernels", May: []string{"core"}, Why: "the megakernel's host side uses core's tensor types"},
	{Prefix: "device", May: []string{"core", "kernels"}, Why: "a backend runs the model; it knows no service or front end"},
	{Prefix: "plugins", Why: "the plugin host never imports core, device, the service or a front end"},
	{Prefix: "embodiments", May: []string{"plugins/pdk", "plugins/abi"}, Why: "a plugin knows the PDK only"},
	{Prefix: "client", May: clientMay, Why: "a client links no server code"},
	{Prefix: "api", Why: "protocol vocabulary shared by servers and clients; a leaf"},
	{Prefix: "wire", May: []string{"core"}, Why: "wire formats shared by servers and clients; they know no server"},
	{Prefix: "session", Why: "per-robot RTC state; a leaf the service core holds"},
	{Prefix: "safety", May: []string{"plugins/abi"}, Why: "the gate reads the plugins' declared limits and nothing else"},
	{Prefix: "record", May: []string{"safety"}, Why: "the flight recorder stores the gate's verdict; it knows no server"},
	{Prefix: "service", May: []string{"core", "plugins", "device", "config", "internal/freelist", "wire", "session", "safety", "record"},
		Why: "the service core drives core, plugins and device interfaces, holds the sessions, the safety gate and the recorder; it knows no network protocol"},
	{Prefix: "binding", May: []string{"core", "plugins", "device", "config", "internal/freelist", "service"},
		Why: "binds plugins, checkpoint and device into the service's interfaces"},
	{Prefix: "frontend", May: []string{"service", "config", "wire", "api"},
		Why: "a front end translates its protocol to the service; it knows no plugins, devices or model"},
}

// Client packages (client/ and below, or a last path element ending in
// "client") may import no server package, only the protocol vocabulary
// (api), the wire formats (wire) and
// core: a client's dependency closure stays small.
var clientMay = []string{"client", "api", "wire", "core"}

// Exceptions are known breaks, each with the issue that removes it; an
// exception that no longer occurs is reported too, so the list only shrinks.
var Exceptions = map[string]string{}

// Graph maps a package (module-relative) to its module-relative imports.
type Graph map[string][]string

// Check returns every import of g that breaks Rules, and every exception
// that did not occur, sorted; nil when the graph holds.
func Check(g Graph) []string {
	var bad []string
	seen := map[string]bool{}
	for pkg, imps := range g {
		r, ok := ruleOf(pkg)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: no rule covers this package (add it to archtest.Rules)", pkg))
			continue
		}
		for _, imp := range imps {
			edge := pkg + " -> " + imp
			if _, ok := Exceptions[edge]; ok {
				seen[edge] = true
				continue
			}
			if isClient(pkg) && !allowed(imp, append([]string{pkg}, clientMay...)) {
				bad = append(bad, fmt.Sprintf("%s: a client package imports a server package", edge))
				continue
			}
			if r.All || allowed(imp, append([]string{r.Prefix}, r.May...)) {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s: %s may import %s only (%s)", edge, r.Prefix, list(r), r.Why))
		}
	}
	for edge, why := range Exceptions {
		if !seen[edge] {
			bad = append(bad, fmt.Sprintf("%s: listed as an exception (%s) but no longer imported: remove it from archtest.Exceptions", edge, why))
		}
	}
	sort.Strings(bad)
	return bad
}

func ruleOf(pkg string) (Rule, bool) {
	for _, r := range Rules {
		if under(pkg, r.Prefix) {
			return r, true
		}
	}
	return Rule{}, false
}

func under(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

func allowed(imp string, prefixes []string) bool {
	for _, p := range prefixes {
		if under(imp, p) {
			return true
		}
	}
	return false
}

// isClient: client/ and its subpackages (client/zmqclient, client/rawobs,
// …), and any package whose last element ends in "client".
func isClient(pkg string) bool {
	if under(pkg, "client") {
		return true
	}
	last := pkg[strings.LastIndex(pkg, "/")+1:]
	return strings.HasSuffix(last, "client")
}

func list(r Rule) string {
	if len(r.May) == 0 {
		return "itself"
	}
	return "itself, " + strings.Join(r.May, ", ")
}
