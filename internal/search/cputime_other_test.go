//go:build !linux

package search

import "time"

// threadCPU is not measured outside Linux: the CPU percentiles read 0.
func threadCPU() time.Duration { return 0 }
