//go:build !linux

package main

import "time"

// processCPU is only implemented on Linux; elsewhere the CPU figures are
// left out.
func processCPU(int) (time.Duration, bool) { return 0, false }

func childrenOf(int) []int { return nil }

// processRSS is only implemented on Linux; elsewhere memory figures are
// left out.
func processRSS(int) (int64, bool) { return 0, false }
