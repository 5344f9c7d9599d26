package service

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"unicode/utf8"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

// BenchmarkDecodeJSONDemo: the stages of the /predict "parse" timing on
// the DROID demo body (testdata/droid_request.json: four base64 PNG frames,
// the state groups, the instruction and a 40×132 noise array of JSON
// numbers, 245 KB): the UTF-8 check, parseJSON's tree, parseRequest's
// schema pass, the whole of decodeJSON, and encoding/json with UseNumber
// for scale.
//
//	go test -run '^$' -bench DecodeJSONDemo -benchmem ./service
func BenchmarkDecodeJSONDemo(b *testing.B) {
	body, err := os.ReadFile("testdata/droid_request.json")
	if err != nil {
		b.Fatal(err)
	}
	tree, err := parseJSON(body)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"utf8", func() error {
			if !utf8.Valid(body) {
				b.Fatal("invalid UTF-8")
			}
			return nil
		}},
		{"tree", func() error { _, err := parseJSON(body); return err }},
		{"schema", func() error { _, err := parseRequest(tree); return err }},
		{"decodeJSON", func() error { _, err := decodeJSON(body); return err }},
		{"encoding-json", func() error {
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.UseNumber()
			var v any
			return dec.Decode(&v)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			defer benchcpu.Report(b, benchcpu.Now())
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
