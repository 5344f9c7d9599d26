package inflate

import (
	"bytes"
	stdflate "compress/flate"
	"hash/adler32"
	"io"
	"testing"

	kflate "github.com/klauspost/compress/flate"

	"github.com/gr00tgw/gr00tgw/internal/benchcpu"
)

// BenchmarkCaseA: the four case-A IDAT streams (one op = all four, 692 KB
// out), decoded by this package (zlib with Adler-32; raw DEFLATE with the
// assembly and with the Go fast loop), klauspost/compress/flate and
// compress/flate (raw DEFLATE, reused readers over a *bytes.Reader).
func BenchmarkCaseA(b *testing.B) {
	streams, sizes := caseAIDAT(b)
	total := 0
	for _, s := range sizes {
		total += s
	}
	dst := make([][]byte, len(streams))
	for i := range dst {
		dst[i] = make([]byte, sizes[i])
	}
	b.Run("impl=inflate-zlib", func(b *testing.B) {
		var d Decoder
		b.ReportAllocs()
		defer benchcpu.Report(b, benchcpu.Now())
		b.SetBytes(int64(total))
		for b.Loop() {
			for i, s := range streams {
				if _, err := d.Zlib(dst[i], s); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("impl=inflate-raw", func(b *testing.B) {
		var d Decoder
		b.ReportAllocs()
		defer benchcpu.Report(b, benchcpu.Now())
		b.SetBytes(int64(total))
		for b.Loop() {
			for i, s := range streams {
				if _, err := d.Raw(dst[i], s[2:len(s)-4]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("impl=inflate-raw-goloop", func(b *testing.B) {
		asm := useFastAsm
		useFastAsm = false
		defer func() { useFastAsm = asm }()
		var d Decoder
		b.ReportAllocs()
		defer benchcpu.Report(b, benchcpu.Now())
		b.SetBytes(int64(total))
		for b.Loop() {
			for i, s := range streams {
				if _, err := d.Raw(dst[i], s[2:len(s)-4]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("impl=klauspost-raw", func(b *testing.B) {
		var br bytes.Reader
		r := kflate.NewReader(&br)
		b.ReportAllocs()
		defer benchcpu.Report(b, benchcpu.Now())
		b.SetBytes(int64(total))
		for b.Loop() {
			for i, s := range streams {
				br.Reset(s[2 : len(s)-4])
				_ = r.(kflate.Resetter).Reset(&br, nil)
				if _, err := io.ReadFull(r, dst[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("impl=stdlib-raw", func(b *testing.B) {
		var br bytes.Reader
		r := stdflate.NewReader(&br)
		b.ReportAllocs()
		defer benchcpu.Report(b, benchcpu.Now())
		b.SetBytes(int64(total))
		for b.Loop() {
			for i, s := range streams {
				br.Reset(s[2 : len(s)-4])
				_ = r.(stdflate.Resetter).Reset(&br, nil)
				if _, err := io.ReadFull(r, dst[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func BenchmarkAdler32(b *testing.B) {
	p := make([]byte, 173000)
	for i := range p {
		p[i] = byte(i * 7)
	}
	b.Run("impl=inflate", func(b *testing.B) {
		b.ReportAllocs()
		defer benchcpu.Report(b, benchcpu.Now())
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			Adler32(p)
		}
	})
	b.Run("impl=inflate-generic", func(b *testing.B) {
		b.ReportAllocs()
		defer benchcpu.Report(b, benchcpu.Now())
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			adlerGeneric(1, 0, p)
		}
	})
	b.Run("impl=hash-adler32", func(b *testing.B) {
		b.ReportAllocs()
		defer benchcpu.Report(b, benchcpu.Now())
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			adler32.Checksum(p)
		}
	})
}
