// Package text holds the host-side text path of GR00T N1.7: a pure-Go Qwen
// byte-level BPE tokenizer read from a Hugging Face tokenizer.json, the
// upstream language formalisation (FormalizeLanguage) and the N1.7 prompt
// layout (BuildPrompt).
//
// The tokenizer reproduces Hugging Face tokenizers (Rust 0.23 and the pure-JS
// @huggingface/tokenizers 0.2.0) id for id on the committed corpus
// testdata/text/tokenizer_golden.jsonl: added tokens are split out first
// (leftmost, longest on ties), each remaining segment is NFC-normalised,
// split by a hand-written equivalent of the Qwen pre-tokenizer regex
// (SplitPieces), mapped through the GPT-2 byte↔unicode table and merged by
// rank.
package text

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ErrInvalidUTF8 is returned (wrapped) by Encode when its input is not valid
// UTF-8. Python and Rust strings are always valid text, so there is no
// reference behaviour to copy; rejecting beats silently substituting U+FFFD.
var ErrInvalidUTF8 = errors.New("invalid UTF-8")

// AddedToken is one entry of tokenizer.json "added_tokens". Every added
// token is matched verbatim in the raw input before normalisation (all Qwen
// added tokens have normalized=false, no lstrip/rstrip/single_word; Load
// rejects tokens that ask for those).
type AddedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// Tokenizer is an immutable byte-level BPE tokenizer. All methods are safe
// for concurrent use; the only mutable state is an internal, bounded,
// mutex-guarded cache of per-pre-token encodings.
type Tokenizer struct {
	vocab        map[string]int32
	idToToken    []string
	byteID       [256]int32
	merges       map[uint64]merge
	nMerges      int32
	ignoreMerges bool
	nfc          bool

	added      []AddedToken
	addedByID  map[int32]AddedToken
	addedFirst [256][]int // indices into added with that first byte, longest first

	cache *pieceCache
}

type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (t *Tokenizer) addMerge(a, b string) error {
	return t.addMergeBytes([]byte(a), []byte(b), []byte(a+b))
}

// addMergeBytes registers the next merge rank for (a, b); ab = a+b. The
// map lookups with string(x) do not allocate.
func (t *Tokenizer) addMergeBytes(a, b, ab []byte) error {
	ia, ok := t.vocab[string(a)]
	if !ok {
		return fmt.Errorf("token %q not in vocab", a)
	}
	ib, ok := t.vocab[string(b)]
	if !ok {
		return fmt.Errorf("token %q not in vocab", b)
	}
	im, ok := t.vocab[string(ab)]
	if !ok {
		return fmt.Errorf("merged token %q not in vocab", ab)
	}
	if t.merges == nil {
		t.merges = make(map[uint64]merge, 160000)
	}
	// A repeated pair keeps its last rank, as in the Rust builder (HashMap
	// collect).
	t.merges[pairKey(ia, ib)] = merge{rank: t.nMerges, id: im}
	t.nMerges++
	return nil
}

// finish builds the derived tables after the JSON has been read.
func (t *Tokenizer) finish() error {
	maxID := int32(-1)
	for _, id := range t.vocab {
		maxID = max(maxID, id)
	}
	t.addedByID = make(map[int32]AddedToken, len(t.added))
	for i, a := range t.added {
		if a.Content == "" {
			return fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		if a.SingleWord || a.LStrip || a.RStrip || a.Normalized {
			return fmt.Errorf("added_tokens[%d] %q: single_word/lstrip/rstrip/normalized unsupported", i, a.Content)
		}
		if a.ID < 0 {
			return fmt.Errorf("added_tokens[%d] %q: negative id", i, a.Content)
		}
		t.addedByID[a.ID] = a
		maxID = max(maxID, a.ID)
		c := a.Content[0]
		t.addedFirst[c] = append(t.addedFirst[c], i)
	}
	for c := range t.addedFirst {
		l := t.addedFirst[c]
		sort.SliceStable(l, func(x, y int) bool { return len(t.added[l[x]].Content) > len(t.added[l[y]].Content) })
	}
	// Ids index idToToken: a sparse id far past the table (a corrupt or
	// hostile tokenizer.json) would allocate gigabytes. Real vocabularies
	// are dense (Qwen3's 151,669 tokens reach id 151,668).
	if n := len(t.vocab) + len(t.added); int64(maxID) >= 2*int64(n)+1024 {
		return fmt.Errorf("token id %d is far past the %d tokens (ids must be dense)", maxID, n)
	}
	t.idToToken = make([]string, maxID+1)
	for tok, id := range t.vocab {
		t.idToToken[id] = tok
	}
	for _, a := range t.added {
		t.idToToken[a.ID] = a.Content
	}
	for b := range 256 {
		id, ok := t.vocab[string(byteToRune[b])]
		if !ok {
			return fmt.Errorf("vocab: byte 0x%02x (%q) missing: not a byte-level vocabulary", b, byteToRune[b])
		}
		t.byteID[b] = id
	}
	t.cache = newPieceCache(defaultCacheEntries)
	return nil
}

// VocabSize is one more than the largest token id (BPE vocabulary and added
// tokens together): 151 669 for Qwen3. The model's embedding table may be
// larger (151 936).
func (t *Tokenizer) VocabSize() int { return len(t.idToToken) }

// TokenID returns the id of token, which is either an added token's content
// (e.g. "<|image_pad|>") or a vocabulary entry in byte-level form (e.g.
// "Ġthe").
func (t *Tokenizer) TokenID(token string) (int32, bool) {
	for _, i := range t.addedFirst[firstByte(token)] {
		if t.added[i].Content == token {
			return t.added[i].ID, true
		}
	}
	id, ok := t.vocab[token]
	return id, ok
}

func firstByte(s string) byte {
	if s == "" {
		return 0
	}
	return s[0]
}

// AddedTokens returns a copy of the added tokens in file order.
func (t *Tokenizer) AddedTokens() []AddedToken { return append([]AddedToken(nil), t.added...) }

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int32) bool { return t.addedByID[id].Special }

// Encode returns the token ids of s, with added tokens recognised (HF
// add_special_tokens=false: no BOS/EOS is added). s must be valid UTF-8,
// otherwise the error wraps ErrInvalidUTF8 and names the byte offset.
func (t *Tokenizer) Encode(s string) ([]int32, error) {
	return t.AppendEncode(make([]int32, 0, len(s)/3+4), s)
}

// AppendEncode appends the token ids of s (see Encode) to dst.
func (t *Tokenizer) AppendEncode(dst []int32, s string) ([]int32, error) {
	if err := checkUTF8(s); err != nil {
		return dst, err
	}
	start := 0
	for i := 0; i < len(s); {
		if cands := t.addedFirst[s[i]]; len(cands) > 0 {
			matched := -1
			for _, k := range cands {
				if strings.HasPrefix(s[i:], t.added[k].Content) {
					matched = k
					break
				}
			}
			if matched >= 0 {
				dst = t.appendOrdinary(dst, s[start:i])
				dst = append(dst, t.added[matched].ID)
				i += len(t.added[matched].Content)
				start = i
				continue
			}
		}
		i++
	}
	return t.appendOrdinary(dst, s[start:]), nil
}

// EncodeOrdinary encodes s without recognising added tokens: "<|im_end|>"
// in s becomes ordinary text pieces (HF split_special_tokens=true).
func (t *Tokenizer) EncodeOrdinary(s string) ([]int32, error) {
	if err := checkUTF8(s); err != nil {
		return nil, err
	}
	return t.appendOrdinary(nil, s), nil
}

func checkUTF8(s string) error {
	if utf8.ValidString(s) {
		return nil
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Errorf("text: encode: byte offset %d: %w", i, ErrInvalidUTF8)
		}
		i += n
	}
	return fmt.Errorf("text: encode: %w", ErrInvalidUTF8)
}

// appendOrdinary normalises, pre-tokenizes and BPE-encodes a segment that
// contains no added token.
func (t *Tokenizer) appendOrdinary(dst []int32, seg string) []int32 {
	if seg == "" {
		return dst
	}
	if t.nfc && !norm.NFC.IsNormalString(seg) {
		seg = norm.NFC.String(seg)
	}
	for i := 0; i < len(seg); {
		j := matchAt(seg, i)
		dst = t.appendPiece(dst, seg[i:j])
		i = j
	}
	return dst
}

// appendPiece BPE-encodes one pre-token, through the cache.
func (t *Tokenizer) appendPiece(dst []int32, piece string) []int32 {
	if len(piece) == 1 {
		return append(dst, t.byteID[piece[0]])
	}
	if ids, ok := t.cache.get(piece); ok {
		return append(dst, ids...)
	}
	n := len(dst)
	dst = t.bpe(dst, piece)
	if len(piece) <= maxCachedPiece {
		t.cache.put(strings.Clone(piece), append([]int32(nil), dst[n:]...))
	}
	return dst
}

// bpe merges the bytes of piece by rank: repeatedly the adjacent pair with
// the lowest merge rank, leftmost on ties, until no pair has a merge.
func (t *Tokenizer) bpe(dst []int32, piece string) []int32 {
	if t.ignoreMerges {
		if id, ok := t.vocab[byteLevel(piece)]; ok {
			return append(dst, id)
		}
	}
	if len(piece) > heapThreshold {
		return t.bpeLong(dst, piece)
	}
	return t.bpeShort(dst, piece)
}

// bpeShort is the quadratic loop for short pre-tokens (≤ heapThreshold
// bytes): no allocation, cache-friendly.
func (t *Tokenizer) bpeShort(dst []int32, piece string) []int32 {
	var symBuf [heapThreshold]int32
	var rankBuf [heapThreshold]merge
	syms := symBuf[:0]
	if len(piece) > len(symBuf) {
		syms = make([]int32, 0, len(piece))
	}
	for i := 0; i < len(piece); i++ {
		syms = append(syms, t.byteID[piece[i]])
	}
	// ranks[k] is the merge of (syms[k], syms[k+1]); rank -1 = none.
	ranks := rankBuf[:0]
	if len(piece) > len(rankBuf) {
		ranks = make([]merge, 0, len(piece))
	}
	for k := 0; k+1 < len(syms); k++ {
		ranks = append(ranks, t.lookup(syms[k], syms[k+1]))
	}
	for len(syms) > 1 {
		best := -1
		for k, m := range ranks {
			if m.rank >= 0 && (best < 0 || m.rank < ranks[best].rank) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		syms[best] = ranks[best].id
		syms = append(syms[:best+1], syms[best+2:]...)
		ranks = append(ranks[:best], ranks[best+1:]...)
		if best > 0 {
			ranks[best-1] = t.lookup(syms[best-1], syms[best])
		}
		if best < len(ranks) {
			ranks[best] = t.lookup(syms[best], syms[best+1])
		}
	}
	return append(dst, syms...)
}

func (t *Tokenizer) lookup(a, b int32) merge {
	if m, ok := t.merges[pairKey(a, b)]; ok {
		return m
	}
	return merge{rank: -1}
}

// Decode turns ids back into text: added tokens verbatim (unless
// skipSpecial and the token is special), vocabulary tokens through the
// inverse byte map; invalid UTF-8 is replaced by U+FFFD as in the HF
// ByteLevel decoder. Unknown ids are an error.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) (string, error) {
	var b strings.Builder
	var raw []byte
	flush := func() {
		b.WriteString(strings.ToValidUTF8(string(raw), "\uFFFD"))
		raw = raw[:0]
	}
	for i, id := range ids {
		if a, ok := t.addedByID[id]; ok {
			flush()
			if !(skipSpecial && a.Special) {
				b.WriteString(a.Content)
			}
			continue
		}
		if id < 0 || int(id) >= len(t.idToToken) || t.idToToken[id] == "" {
			return "", fmt.Errorf("text: decode: ids[%d]=%d: unknown id", i, id)
		}
		for _, r := range t.idToToken[id] {
			c, ok := runeToByte(r)
			if !ok {
				return "", fmt.Errorf("text: decode: ids[%d]=%d: token %q is not byte-level", i, id, t.idToToken[id])
			}
			raw = append(raw, c)
		}
	}
	flush()
	return b.String(), nil
}

const (
	defaultCacheEntries = 16384
	maxCachedPiece      = 256
)

// pieceCache is a bounded map from pre-token to ids. When full it is simply
// emptied: pre-tokens of instructions repeat heavily, and an O(1) reset
// keeps the worst case bounded without LRU bookkeeping.
type pieceCache struct {
	mu  sync.RWMutex
	max int
	m   map[string][]int32
}

func newPieceCache(n int) *pieceCache {
	return &pieceCache{max: n, m: make(map[string][]int32, min(n, 1024))}
}

func (c *pieceCache) get(k string) ([]int32, bool) {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	return v, ok
}

func (c *pieceCache) put(k string, v []int32) {
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = v
	c.mu.Unlock()
}
