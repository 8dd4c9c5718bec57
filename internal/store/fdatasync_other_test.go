//go:build !linux

package store_test

import "os"

// fdatasync falls back to a full sync where the system has no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }

// preallocate extends f; without fallocate the blocks may stay sparse.
func preallocate(f *os.File, size int64) error { return f.Truncate(size) }
