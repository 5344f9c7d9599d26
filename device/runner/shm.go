//go:build linux

package runner

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// segment is one shared-memory region: a memfd mapped MAP_SHARED. The
// client creates it (newSegment) and passes the descriptor to each runner
// that serves a request in it; a runner maps what it receives (mapSegment).
type segment struct {
	id  uint32
	fd  int
	mem []byte
	// loaned: out of the Pool's free list (a PixelBuffer or a call holds
	// it); Pool.Close leaves it mapped until it comes back (Pool.segMu).
	loaned bool
}

// newSegment creates a memfd of size bytes, seals its size and maps it.
// The seals (no shrink, no grow, no further seals) keep a runner that
// truncates the descriptor it was passed from turning the gateway's next
// access to the mapping into a SIGBUS (a crash of the gateway process,
// not a failed request).
func newSegment(id uint32, size int) (*segment, error) {
	fd, err := unix.MemfdCreate(fmt.Sprintf("gr00tgw-runner-%d", id), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("runner: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("runner: segment[%d] ftruncate %d: %w", id, size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("runner: segment[%d] seal: %w", id, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("runner: segment[%d] mmap %d: %w", id, size, err)
	}
	return &segment{id: id, fd: fd, mem: mem}, nil
}

// mapSegment maps a received descriptor of at least size bytes; it takes
// ownership of fd (closed once mapped: the mapping keeps the memory).
func mapSegment(id uint32, fd, size int) (*segment, error) {
	defer closeFD(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("runner: segment[%d]: fstat: %w", id, err)
	}
	if size <= 0 || int64(size) > st.Size {
		return nil, fmt.Errorf("runner: segment[%d]: size %d outside the memfd's %d bytes", id, size, st.Size)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("runner: segment[%d]: mmap %d: %w", id, size, err)
	}
	return &segment{id: id, fd: -1, mem: mem}, nil
}

// close unmaps the segment and closes its descriptor.
func (s *segment) close() {
	if s.mem != nil {
		_ = unix.Munmap(s.mem)
		s.mem = nil
	}
	closeFD(s.fd)
	s.fd = -1
}

// span checks that sp lies inside the segment (4-byte aligned) and names
// it for errors.
func (s *segment) span(name string, sp Span) error {
	// Count > room/4 rather than Offset+4·Count > len: 4·Count can wrap.
	if sp.Offset < 0 || sp.Count < 0 || sp.Offset%4 != 0 || sp.Offset > len(s.mem) || sp.Count > (len(s.mem)-sp.Offset)/4 {
		return fmt.Errorf("%s [offset %d, %d elements] outside segment[%d] of %d bytes", name, sp.Offset, sp.Count, s.id, len(s.mem))
	}
	return nil
}

// f32 is a float32 view of sp (checked by span first).
func (s *segment) f32(sp Span) []float32 {
	if sp.Count == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&s.mem[sp.Offset])), sp.Count)
}

// i32 is an int32 view of sp (checked by span first).
func (s *segment) i32(sp Span) []int32 {
	if sp.Count == 0 {
		return []int32{}
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&s.mem[sp.Offset])), sp.Count)
}

// holds reports whether p (a pixel_values slice) starts at offset 0 of the
// segment and fits in it: pixels written in place by the encoder.
func (s *segment) holds(p []float32) bool {
	if len(p) == 0 || len(s.mem) == 0 {
		return false
	}
	return unsafe.Pointer(&p[0]) == unsafe.Pointer(&s.mem[0]) && 4*len(p) <= len(s.mem)
}

// Segment is a shared-memory segment created by a client: a memfd mapped
// MAP_SHARED, to be passed to runners in ATTACH (for conformance suites and
// tools; the Pool manages its own). Close releases it.
type Segment struct{ s *segment }

// NewSegment creates and maps a memfd of size bytes.
func NewSegment(id uint32, size int) (*Segment, error) {
	s, err := newSegment(id, size)
	if err != nil {
		return nil, err
	}
	return &Segment{s}, nil
}

// FD is the memfd (owned by the Segment).
func (s *Segment) FD() int { return s.s.fd }

// Size is the mapped size in bytes.
func (s *Segment) Size() int { return len(s.s.mem) }

// F32 is a float32 view of sp; it panics outside the segment.
func (s *Segment) F32(sp Span) []float32 {
	if err := s.s.span("span", sp); err != nil {
		panic(err)
	}
	return s.s.f32(sp)
}

// I32 is an int32 view of sp; it panics outside the segment.
func (s *Segment) I32(sp Span) []int32 {
	if err := s.s.span("span", sp); err != nil {
		panic(err)
	}
	return s.s.i32(sp)
}

// Close unmaps the segment and closes the memfd.
func (s *Segment) Close() { s.s.close() }
