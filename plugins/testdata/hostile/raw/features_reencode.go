//go:build reencodefeature

package main

// features lists reencode, but this guest has no gw_reencode export: the
// host must refuse it at load.
const features = `,"features":["reencode"]`
