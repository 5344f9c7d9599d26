//go:build !reencodefeature

package main

const features = ""
