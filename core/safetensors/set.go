package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// IndexFile is the name of a sharded checkpoint's index.
const IndexFile = "model.safetensors.index.json"

// SingleFile is the name of an unsharded checkpoint's weights file.
const SingleFile = "model.safetensors"

// File is one memory-mapped safetensors file. Its tensor bytes stay valid
// until Close. A File is safe for concurrent reads.
type File struct {
	Path   string
	Header *Header
	data   []byte // the whole mapped file
	byName map[string]int
}

// OpenFile maps and validates one safetensors file.
func OpenFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	size := st.Size()
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return nil, &HeaderError{File: path, Msg: fmt.Sprintf("file is %d bytes, shorter than the 8-byte length prefix", size)}
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize || int64(n) > size-8 {
		_, err := ParseHeader(lenBuf[:], size)
		return nil, withFile(err, path)
	}
	prefix := make([]byte, 8+n)
	copy(prefix, lenBuf[:])
	if _, err := io.ReadFull(f, prefix[8:]); err != nil {
		return nil, fmt.Errorf("safetensors: file[%s]: reading header: %w", path, err)
	}
	h, err := ParseHeader(prefix, size)
	if err != nil {
		return nil, withFile(err, path)
	}
	var data []byte
	if size > 0 {
		data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return nil, fmt.Errorf("safetensors: file[%s]: mmap: %w", path, err)
		}
	}
	sf := &File{Path: path, Header: h, data: data, byName: make(map[string]int, len(h.Tensors))}
	for i := range h.Tensors {
		h.Tensors[i].File = path
		sf.byName[h.Tensors[i].Name] = i
	}
	return sf, nil
}

func withFile(err error, path string) error {
	var he *HeaderError
	if errors.As(err, &he) {
		return &HeaderError{File: path, Msg: he.Msg}
	}
	return fmt.Errorf("safetensors: file[%s]: %w", path, err)
}

// Bytes returns the raw little-endian bytes of a tensor, a view into the
// mapping that is valid until Close and must not be written.
func (f *File) Bytes(name string) ([]byte, bool) {
	i, ok := f.byName[name]
	if !ok {
		return nil, false
	}
	t := f.Header.Tensors[i]
	return f.data[f.Header.DataStart+t.Begin : f.Header.DataStart+t.End], true
}

// Close unmaps the file.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	err := unix.Munmap(f.data)
	f.data = nil
	return err
}

// Set is a checkpoint: one or more files whose tensor names are disjoint.
// It is safe for concurrent reads; Close releases every mapping.
type Set struct {
	files  []*File
	byName map[string]*File
	// Index is the parsed index of a sharded set, nil for a single file.
	Index *Index
	once  sync.Once
}

// Index is model.safetensors.index.json.
type Index struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// ErrNotFound is wrapped when a checkpoint path holds no safetensors data or
// a tensor name is absent.
var ErrNotFound = errors.New("not found")

// Open opens a checkpoint. path may be a .safetensors file, an index file, or
// a directory holding either model.safetensors.index.json (sharded) or
// model.safetensors.
func Open(path string) (*Set, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, IndexFile)); err == nil {
			return openIndex(filepath.Join(path, IndexFile))
		}
		single := filepath.Join(path, SingleFile)
		if _, err := os.Stat(single); err != nil {
			return nil, fmt.Errorf("safetensors: dir[%s]: %w: neither %s nor %s", path, ErrNotFound, IndexFile, SingleFile)
		}
		path = single
	}
	if filepath.Ext(path) == ".json" {
		return openIndex(path)
	}
	f, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	s := &Set{files: []*File{f}, byName: map[string]*File{}}
	for _, t := range f.Header.Tensors {
		s.byName[t.Name] = f
	}
	return s, nil
}

func openIndex(path string) (*Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var idx Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("safetensors: index[%s]: %w", path, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("safetensors: index[%s]: empty weight_map", path)
	}
	shards := map[string]bool{}
	for name, shard := range idx.WeightMap {
		if shard == "" || filepath.Base(shard) != shard {
			return nil, fmt.Errorf("safetensors: index[%s]: tensor[%s]: bad shard name %q", path, name, shard)
		}
		shards[shard] = true
	}
	s := &Set{byName: map[string]*File{}, Index: &idx}
	dir := filepath.Dir(path)
	for _, n := range slices.Sorted(maps.Keys(shards)) {
		f, err := OpenFile(filepath.Join(dir, n))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.files = append(s.files, f)
		for _, t := range f.Header.Tensors {
			if prev, dup := s.byName[t.Name]; dup {
				s.Close()
				return nil, fmt.Errorf("safetensors: tensor[%s] in both %s and %s", t.Name, prev.Path, f.Path)
			}
			if want := idx.WeightMap[t.Name]; want != n {
				s.Close()
				if want == "" {
					return nil, fmt.Errorf("safetensors: index[%s]: tensor[%s] is in %s but not in weight_map", path, t.Name, n)
				}
				return nil, fmt.Errorf("safetensors: index[%s]: tensor[%s] is in %s, weight_map says %s", path, t.Name, n, want)
			}
			s.byName[t.Name] = f
		}
	}
	for name, shard := range idx.WeightMap {
		if _, ok := s.byName[name]; !ok {
			s.Close()
			return nil, fmt.Errorf("safetensors: index[%s]: tensor[%s] listed in %s is missing from it", path, name, shard)
		}
	}
	return s, nil
}

// Files lists the mapped files in open order.
func (s *Set) Files() []*File { return s.files }

// Names lists every tensor name, sorted.
func (s *Set) Names() []string {
	return slices.Sorted(maps.Keys(s.byName))
}

// Info describes the tensor called name.
func (s *Set) Info(name string) (TensorInfo, bool) {
	f, ok := s.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Header.Tensors[f.byName[name]], true
}

// Bytes returns the raw bytes of a tensor (a view valid until Close).
func (s *Set) Bytes(name string) ([]byte, error) {
	f, ok := s.byName[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: tensor[%s]: %w", name, ErrNotFound)
	}
	b, _ := f.Bytes(name)
	return b, nil
}

// Float32 returns a newly allocated float32 copy of a BF16, F16 or F32 tensor.
func (s *Set) Float32(name string) ([]float32, error) {
	info, ok := s.Info(name)
	if !ok {
		return nil, fmt.Errorf("safetensors: tensor[%s]: %w", name, ErrNotFound)
	}
	b, _ := s.Bytes(name)
	out := make([]float32, info.NumElements())
	if err := Widen(out, b, info.DType); err != nil {
		return nil, fmt.Errorf("safetensors: tensor[%s]: %w", name, err)
	}
	return out, nil
}

// Widen decodes little-endian BF16, F16 or F32 bytes into dst, which must
// hold exactly len(b)/width elements.
func Widen(dst []float32, b []byte, dt DType) error {
	w := dt.Bits() / 8
	if w == 0 || len(b) != len(dst)*w {
		return fmt.Errorf("cannot widen %d bytes of %s into %d float32", len(b), dt, len(dst))
	}
	switch dt {
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	case F16:
		for i := range dst {
			dst[i] = HalfToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	default:
		return fmt.Errorf("dtype %s cannot be widened to float32", dt)
	}
	return nil
}

// HalfToFloat32 converts an IEEE 754 binary16 value exactly.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: value = mant · 2^-24
	f := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		return -f
	}
	return f
}

// BF16FromFloat32 rounds f to bfloat16 with round-to-nearest-even, as
// torch's Tensor.to(torch.bfloat16) does (NaN → 0x7FC0).
func BF16FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	if f != f {
		return 0x7FC0
	}
	return uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)
}

// BF16 returns a BF16 tensor's elements as their bit patterns (the high
// half of each fp32 pattern), without widening: a view into the mapping
// (valid until Close, must not be written) when the bytes are 2-byte
// aligned on a little-endian host, else a copy. ok is false, with no
// error, when the tensor's dtype is not BF16.
func (s *Set) BF16(name string) (bits []uint16, ok bool, err error) {
	info, found := s.Info(name)
	if !found {
		return nil, false, fmt.Errorf("safetensors: tensor[%s]: %w", name, ErrNotFound)
	}
	if info.DType != BF16 {
		return nil, false, nil
	}
	b, _ := s.Bytes(name)
	n := len(b) / 2
	if n == 0 {
		return []uint16{}, true, nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n), true, nil
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out, true, nil
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Release drops the pages holding a tensor's bytes from the process's
// resident set (madvise MADV_DONTNEED on the read-only shared mapping,
// rounded out to whole pages): a loader that has copied a tensor calls it
// so that the mapped checkpoint does not stay resident next to the
// copies. The page cache keeps the file's pages and views stay valid: a
// later read faults them in again (neighbouring tensors sharing a boundary
// page included). Unknown names are ignored.
func (s *Set) Release(name string) error {
	f, ok := s.byName[name]
	if !ok || f.data == nil {
		return nil
	}
	t := f.Header.Tensors[f.byName[name]]
	page := int64(os.Getpagesize())
	lo := (f.Header.DataStart + t.Begin) / page * page
	hi := min((f.Header.DataStart+t.End+page-1)/page*page, int64(len(f.data)))
	if hi <= lo {
		return nil
	}
	if err := unix.Madvise(f.data[lo:hi], unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("safetensors: tensor[%s]: madvise: %w", name, err)
	}
	return nil
}

// Close unmaps every file. It is safe to call more than once.
func (s *Set) Close() error {
	var errs []error
	s.once.Do(func() {
		for _, f := range s.files {
			if err := f.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}
