// Package resilience holds the failure-handling building blocks that the call
// pipeline composes around every proxied tool call: retry with capped,
// jittered exponential backoff (RetryPolicy) bounded by a per-upstream
// RetryBudget, a two-step circuit breaker per server+tool key (Breaker,
// Breakers) whose state can be persisted and restored, a bulkhead capping
// concurrent calls per upstream (Bulkheads), a token-bucket rate limiter per
// agent (RateLimiter) and an idempotency cache that deduplicates concurrent
// and repeated calls (Idempotency).
//
// The package does no I/O and starts no goroutines of its own. Time comes from
// an injected Clock so that tests never sleep.
package resilience
