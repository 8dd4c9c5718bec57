package front

// DisableFastPath makes f serve every tools/call through the SDK, so that
// tests can compare the fast path's answers with the SDK's.
func DisableFastPath(f *Front) { f.noFastPath = true }

// FastServed is how many tools/call the fast path of f answered.
func FastServed(f *Front) int64 { return f.fastServed.Load() }
