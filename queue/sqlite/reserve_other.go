//go:build !(linux || darwin || freebsd)

package sqlite

// freeSpace cannot measure a filesystem on this platform, so the reserve
// never refuses ingest here.
func freeSpace(string) (uint64, bool) { return 0, false }
