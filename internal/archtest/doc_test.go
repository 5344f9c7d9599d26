package archtest

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rulesDoc is the document whose "Who may import whom" table states Rules,
// relative to this package's directory.
const rulesDoc = "../../RATIONALE.md"

// rulesHeading heads the section that holds the table.
const rulesHeading = "### Who may import whom"

// docRule is one row of the table: the prefix (the first cell's first
// backticked path), whether it may import anything (the second cell reads
// "anything"), and the prefixes of the second cell's backticked paths.
type docRule struct {
	Prefix string
	All    bool
	May    []string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// rulesTable reads the first Markdown table after heading in doc: one
// docRule per row, in order. A row whose first cell names no backticked
// path is an error.
func rulesTable(doc, heading string) ([]docRule, error) {
	_, after, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		return nil, fmt.Errorf("no %q heading", heading)
	}
	var rows []docRule
	in := false
	for _, l := range strings.Split(after, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") {
			break
		}
		if !strings.HasPrefix(l, "|") {
			if in {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if !in { // the header row
			in = true
			continue
		}
		if strings.Trim(cells[0], " -:") == "" {
			continue // the |---| line
		}
		if len(cells) < 2 {
			return nil, fmt.Errorf("row %q: want | package | may import | …", l)
		}
		first := backticked.FindStringSubmatch(cells[0])
		if first == nil {
			return nil, fmt.Errorf("row %q: no `prefix` in its first cell", l)
		}
		r := docRule{Prefix: first[1], All: strings.TrimSpace(cells[1]) == "anything"}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			r.May = append(r.May, m[1])
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no table after %q", heading)
	}
	return rows, nil
}

// wantRows is Rules as the table states them: May without the rule's own
// prefix (a package may always import below it), sorted.
func wantRows(rules []Rule) []docRule {
	var out []docRule
	for _, r := range rules {
		d := docRule{Prefix: r.Prefix, All: r.All}
		for _, m := range r.May {
			if m != r.Prefix {
				d.May = append(d.May, m)
			}
		}
		slices.Sort(d.May)
		out = append(out, d)
	}
	return out
}

// renderTable is the table for rules, to paste into the doc.
func renderTable(rules []Rule) string {
	var b strings.Builder
	b.WriteString("| package | may import | why |\n|---|---|---|\n")
	for i, r := range rules {
		d := wantRows(rules)[i]
		may := "—"
		if d.All {
			may = "anything"
		} else if len(d.May) > 0 {
			may = "`" + strings.Join(d.May, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.Prefix, may, r.Why)
	}
	return b.String()
}

// TestRulesTableMatchesRules: RATIONALE.md's "Who may import whom" table
// lists exactly the prefixes of Rules, in order, each with what it may
// import, so the documented rules cannot drift from the enforced ones.
func TestRulesTableMatchesRules(t *testing.T) {
	raw, err := os.ReadFile(rulesDoc)
	require.NoError(t, err)
	got, err := rulesTable(string(raw), rulesHeading)
	require.NoError(t, err, "%s", rulesDoc)
	for i := range got {
		slices.Sort(got[i].May)
	}
	assert.Equal(t, wantRows(Rules), got,
		"%s's %q table is not archtest.Rules (the why cell is free text); a table that matches:\n%s",
		rulesDoc, rulesHeading, renderTable(Rules))
}

// TestRulesTableReader: the table reader on a made-up doc — a missing
// row, an extra May or a lost "anything" shows up as a difference.
func TestRulesTableReader(t *testing.T) {
	doc := "# x\n\n### Who may import whom\ntext\n\n| package | may import | why |\n|---|---|---|\n" +
		"| `cmd` | anything | wires |\n| `client` (and any `…client`) | `wire`, `api` | no server |\n| `config` | — | leaf |\n\nafter\n| `not` | a row | |\n"
	got, err := rulesTable(doc, rulesHeading)
	require.NoError(t, err)
	assert.Equal(t, []docRule{
		{Prefix: "cmd", All: true},
		{Prefix: "client", May: []string{"wire", "api"}},
		{Prefix: "config"},
	}, got)

	rules := []Rule{{Prefix: "cmd", All: true}, {Prefix: "client", May: []string{"client", "api", "wire"}}, {Prefix: "config"}}
	for i := range got {
		slices.Sort(got[i].May)
	}
	assert.Equal(t, wantRows(rules), got)
	assert.NotEqual(t, wantRows(rules[1:]), got, "a row the rules lack")
	assert.NotEqual(t, wantRows([]Rule{rules[0], {Prefix: "client", May: []string{"api", "wire", "core"}}, rules[2]}), got, "a May the table lacks")
	assert.NotEqual(t, wantRows([]Rule{{Prefix: "cmd"}, rules[1], rules[2]}), got, "anything vs nothing")

	_, err = rulesTable("# x\n", rulesHeading)
	assert.Error(t, err)
	_, err = rulesTable("\n### Who may import whom\n\n| package | may import |\n|---|---|\n| cmd | anything |\n", rulesHeading)
	assert.ErrorContains(t, err, "no `prefix`")
}
