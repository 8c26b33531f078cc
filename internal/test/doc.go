// Package test holds nothing itself: its subpackages are test support (fixtures, golden files, the
// independent config.ini reader, real node components, a log buffer safe across goroutines). No
// product binary links any of them; TestNoBinaryLinksTestSupport holds that.
package test
