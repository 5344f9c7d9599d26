package freelist

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestList(t *testing.T) {
	var l List[*int]
	_, ok := l.Get()
	require.False(t, ok)
	l.Put(new(int)) // Max 0 keeps nothing
	require.Equal(t, 0, l.Len())

	l = List[*int]{Max: 2}
	a, b, c := new(int), new(int), new(int)
	l.Put(a)
	l.Put(b)
	l.Put(c) // dropped
	require.Equal(t, 2, l.Len())
	got, ok := l.Get()
	require.True(t, ok)
	require.Same(t, b, got, "most recent first")
	got, _ = l.Get()
	require.Same(t, a, got)
	_, ok = l.Get()
	require.False(t, ok)
}

func TestListConcurrent(t *testing.T) {
	l := List[[]byte]{Max: 4}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				b, ok := l.Get()
				if !ok {
					b = make([]byte, 16)
				}
				b[0]++
				l.Put(b)
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, l.Len(), 4)
}
