// Package kernels is the host side of the GR00T N1.7 DiT megakernel: the
// persistent Tenstorrent Blackhole program that runs the whole denoise and
// streams a bfp8_b weight arena from DRAM.
//
// The work is split by what each part holds:
//
//   - kernels/tile: bfp8_b, bfp4_b and bf16 32×32 tiles, bit-exact with
//     tt-metal's host packer.
//   - kernels/arena: the DRAM weight arena plan (order, banks, pages, digest)
//     and its packed bytes, the device upload cache.
//   - kernels/schedule: the core map of the 11×10 compute grid (DRAM readers,
//     hubs, compute cores, multicast rectangles) and the per-core tile
//     schedule of every DiT op, with its invariants and L1 model.
//   - kernels/emu: a CPU execution of that schedule, usable as the
//     mixed_dit DiT of the CPU backend.
//
// This package itself only gathers the facts the gateway reports on /info.
package kernels
