package store_test

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data and only the metadata needed to read it back,
// as SQLite does for its WAL on Linux.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// preallocate gives f size bytes of real blocks, so that a write into them
// changes no extent metadata.
func preallocate(f *os.File, size int64) error { return syscall.Fallocate(int(f.Fd()), 0, 0, size) }
