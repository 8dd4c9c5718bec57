package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Sink stores records. The app adapts internal/store to it. Both methods
// must honour ctx: [Recorder.Close] cancels it when its own deadline passes
// and then waits for the call to return.
type Sink interface {
	// WriteAudit stores recs in order. It must not keep recs after it
	// returns. An error makes the Recorder retry the whole batch.
	WriteAudit(ctx context.Context, recs []Record) error
	// PurgeAudit deletes records invoked before before and reports how many.
	PurgeAudit(ctx context.Context, before time.Time) (int64, error)
}

// Options tune a [Recorder]. The zero value of every field means its default.
type Options struct {
	// QueueSize bounds the records waiting to be written (default 10000),
	// besides the batch being stored and the next one being prepared (at
	// most BatchSize each). When it is full, Record drops rather than
	// slow the call down.
	QueueSize int
	// BatchSize bounds the records passed to one WriteAudit (default 256).
	BatchSize int
	// FlushInterval is how long a partial batch may wait for company
	// before it is written (default 200ms).
	FlushInterval time.Duration
	// Retention is how long records are kept; 0 keeps them forever.
	// Otherwise rows invoked before now-Retention are purged at start and
	// every PurgeInterval.
	Retention time.Duration
	// PurgeInterval is the time between purges (default 1h).
	PurgeInterval time.Duration
	// Replica is stamped on records whose Replica is empty, so rows from
	// several gateway replicas sharing one database can be told apart.
	Replica string
	// WriteTimeout bounds one WriteAudit or PurgeAudit call (default 10s),
	// so a hung database cannot stall the writer for ever.
	WriteTimeout time.Duration
	// RetryBackoff is the base delay before the second and third write
	// attempt (default 100ms); it doubles per attempt, with jitter.
	RetryBackoff time.Duration
	// Logger receives drop, write-failure and purge messages, never record
	// contents. nil discards.
	Logger *slog.Logger
	// Clock stamps InvokedAt, computes the purge cut-off and paces drop
	// warnings (default time.Now).
	Clock func() time.Time
	// OnDepth, if set, is called after each enqueue and each written or
	// dropped batch with the number of records accepted but not yet
	// handled (a metrics gauge). It is called from several goroutines.
	OnDepth func(n int)
	// OnOverflow, if set, is called once per dropped record, whether the
	// queue was full, the Recorder closed, or the sink kept failing (a
	// metrics counter). It is called from several goroutines.
	OnOverflow func()
}

// Defaults of [Options].
const (
	DefaultQueueSize     = 10000
	DefaultBatchSize     = 256
	DefaultFlushInterval = 200 * time.Millisecond
	DefaultPurgeInterval = time.Hour
	DefaultWriteTimeout  = 10 * time.Second
	DefaultRetryBackoff  = 100 * time.Millisecond
)

// writeAttempts bounds the tries of one batch: a database that fails three
// times in a row will not be saved by a fourth try, and the queue behind it
// keeps growing.
const writeAttempts = 3

// dropWarnEvery paces the "records dropped" warning so an overloaded
// gateway does not also flood its log.
const dropWarnEvery = 10 * time.Second

// ErrDropped reports that records were lost because the sink kept failing
// or [Recorder.Close] ran out of time.
var ErrDropped = errors.New("audit records dropped")

// Recorder writes records to a [Sink] in the background, in batches and in
// the order they were recorded. [Recorder.Record] never blocks, so auditing
// can never slow down or fail a tool call: when the queue is full the record
// is dropped and counted instead. [Recorder.RecordSync] is the durable
// alternative for callers that must wait until their row is stored. The
// Deferred variants of both leave the costly fields of a record (hash,
// summary) to the writer, off the caller's path.
//
// A Recorder owns three goroutines: the writer, which batches records and
// derives deferred fields; the committer, which hands batches to the sink
// one at a time, so that the writer prepares the next batch while the
// previous one is being stored; and, with Retention, the purger. Its owner
// must call [Recorder.Close]. All methods are safe for concurrent use.
type Recorder struct {
	sink     Sink
	queue    chan entry
	flushReq chan struct{}
	quit     chan struct{} // closed by Close: drain and stop
	done     chan struct{} // closed when every goroutine has returned

	// ctx is passed to the sink; cancelled when Close runs out of time,
	// which aborts writes and retries.
	ctx         context.Context
	cancel      context.CancelFunc
	purgeCancel context.CancelFunc

	batchSize     int
	flushInterval time.Duration
	writeTimeout  time.Duration
	retryBackoff  time.Duration
	replica       string
	logger        *slog.Logger
	clock         func() time.Time
	onDepth       func(int)
	onOverflow    func()

	// mu orders sends into queue with increments of accepted, so that the
	// first n records in the queue are exactly records 1..n (see Flush).
	mu       sync.Mutex
	closed   bool
	accepted atomic.Int64

	processed    atomic.Int64  // written, or dropped after write failures
	dropped      atomic.Uint64 // every dropped record
	writeDropped atomic.Uint64 // records dropped after write failures

	progMu   sync.Mutex
	progress chan struct{} // closed and replaced whenever processed grows

	warnMu       sync.Mutex
	lastWarn     time.Time
	pendingDrops uint64

	// direct counts RecordSync calls writing to the sink themselves
	// because the queue was full; Close waits for them. Add only under mu
	// while not closed, so no Add races the Wait.
	direct sync.WaitGroup

	closeOnce sync.Once
}

// entry is a queued record. res is nil for [Recorder.Record]; for
// [Recorder.RecordSync] it receives the outcome of the batch holding the
// record (buffered, so the writer never waits for a caller that gave up).
// derive, if set, fills the record's deferred fields before it is batched.
type entry struct {
	rec    Record
	res    chan error
	derive func(*Record)
}

// NewRecorder starts a Recorder writing to sink. A nil opts means defaults.
// It panics if sink is nil, which is a programming error.
func NewRecorder(sink Sink, opts *Options) *Recorder {
	if sink == nil {
		panic("audit: NewRecorder with nil sink")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.PurgeInterval <= 0 {
		o.PurgeInterval = DefaultPurgeInterval
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Recorder{
		sink:          sink,
		queue:         make(chan entry, o.QueueSize),
		flushReq:      make(chan struct{}, 1),
		quit:          make(chan struct{}),
		done:          make(chan struct{}),
		ctx:           ctx,
		cancel:        cancel,
		batchSize:     o.BatchSize,
		flushInterval: o.FlushInterval,
		writeTimeout:  o.WriteTimeout,
		retryBackoff:  o.RetryBackoff,
		replica:       o.Replica,
		logger:        o.Logger,
		clock:         o.Clock,
		onDepth:       o.OnDepth,
		onOverflow:    o.OnOverflow,
		progress:      make(chan struct{}),
	}
	// Purges are not worth finishing once Close has begun, so the purger
	// has its own context, cancelled at the start of Close.
	purgeCtx, purgeCancel := context.WithCancel(ctx)
	r.purgeCancel = purgeCancel
	var wg sync.WaitGroup
	wg.Go(r.write)
	if o.Retention > 0 {
		wg.Go(func() { r.purge(purgeCtx, o.Retention, o.PurgeInterval) })
	}
	go func() {
		wg.Wait()
		// The writer returns only after Close set closed, so no direct
		// write can start now.
		r.direct.Wait()
		close(r.done)
	}()
	return r
}

// Record enqueues rec, filling ID (a UUIDv7, so IDs sort by time),
// InvokedAt, Kind ([KindInvocation]) and Replica when they are empty. It
// never blocks: it returns false, counts the record as dropped and logs (at
// most one warning per 10s, with the count) when the queue is full or the
// Recorder is closed.
func (r *Recorder) Record(rec Record) bool {
	return r.RecordDeferred(rec, nil)
}

// RecordDeferred is [Recorder.Record] for a record some of whose fields
// (typically ParamsHash and ResultSummary, whose redaction is the costly
// part of auditing a call) are derived by derive, which the writer runs
// just before it batches the record: the caller pays only for handing the
// material over. derive must read only data nobody modifies any more (the
// caller's own copies), must not block, and must not touch the fields
// Record fills. A panic in derive is logged and leaves the fields empty;
// the record is still written. A nil derive makes this Record.
func (r *Recorder) RecordDeferred(rec Record, derive func(*Record)) bool {
	r.fill(&rec)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.drop("recorder closed")
		return false
	}
	select {
	case r.queue <- entry{rec: rec, derive: derive}:
		r.accepted.Add(1)
		r.mu.Unlock()
		r.reportDepth()
		return true
	default:
		r.mu.Unlock()
		r.drop("queue full")
		return false
	}
}

// RecordSync records rec like [Recorder.Record] but returns only once it is
// stored, for callers that must not lose a row (a replica killed right
// after a call completed still has its audit row). The writer flushes at
// once when a synchronous record is waiting, so concurrent callers share
// one WriteAudit (group commit) and none waits for FlushInterval.
//
// If ctx ends first, RecordSync returns ctx's error wrapped; the record
// stays queued and is still written. If the queue is full, RecordSync writes
// the record to the sink itself (bounded by ctx, ahead of the queued
// records) rather than drop it. It returns an error wrapping [ErrDropped]
// when the record was lost: the sink failed after its retries (the error
// wraps the sink's too), ctx ended during such a direct write, or the
// Recorder is closed.
func (r *Recorder) RecordSync(ctx context.Context, rec Record) error {
	return r.RecordSyncDeferred(ctx, rec, nil)
}

// RecordSyncDeferred is [Recorder.RecordSync] with derive as in
// [Recorder.RecordDeferred]: it returns once the record, derived fields
// included, is stored. The durable part is the write: derive runs on the
// writer while the committer may be storing the batch before, and
// concurrent callers' records are derived and committed together.
func (r *Recorder) RecordSyncDeferred(ctx context.Context, rec Record, derive func(*Record)) error {
	r.fill(&rec)
	res := make(chan error, 1)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.drop("recorder closed")
		return fmt.Errorf("recording audit record: %w: recorder closed", ErrDropped)
	}
	select {
	case r.queue <- entry{rec: rec, res: res, derive: derive}:
		r.accepted.Add(1)
		r.mu.Unlock()
		r.reportDepth()
	default:
		r.direct.Add(1)
		r.mu.Unlock()
		defer r.direct.Done()
		r.derive(&rec, derive)
		return r.writeDirect(ctx, rec)
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("waiting for audit record to be written: %w", ctx.Err())
	}
}

// writeDirect writes one record from the caller's goroutine, with the
// writer's retries, until ctx ends or Close gives up.
func (r *Recorder) writeDirect(ctx context.Context, rec Record) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	attempts, err := r.writeRetrying(ctx, []Record{rec})
	if err == nil {
		return nil
	}
	r.logger.Error("audit record dropped after direct write failures (queue full)",
		"count", 1, "attempts", attempts, "err", err)
	r.countWriteDrops(1)
	return fmt.Errorf("writing audit record: %w: %w", ErrDropped, err)
}

// fill sets the defaults Record documents.
func (r *Recorder) fill(rec *Record) {
	if rec.ID == "" {
		if id, err := uuid.NewV7(); err == nil {
			rec.ID = id.String()
		} else {
			rec.ID = uuid.NewString()
		}
	}
	if rec.InvokedAt.IsZero() {
		rec.InvokedAt = r.clock()
	}
	if rec.Kind == "" {
		rec.Kind = KindInvocation
	}
	if rec.Replica == "" {
		rec.Replica = r.replica
	}
}

// derive runs fn on rec, if set. A panic would otherwise kill the writer
// and with it every later record; it costs this record its derived fields.
func (r *Recorder) derive(rec *Record, fn func(*Record)) {
	if fn == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			// Not the panic value: it may hold what was being redacted.
			r.logger.Error("deriving audit record fields panicked; written without them",
				"correlation_id", rec.CorrelationID, "operation", rec.Operation)
		}
	}()
	d := *rec
	fn(&d)
	*rec = d
}

// drop counts one record dropped by Record and warns at most once per
// dropWarnEvery with the number dropped since the previous warning.
func (r *Recorder) drop(reason string) {
	r.dropped.Add(1)
	if r.onOverflow != nil {
		r.onOverflow()
	}
	now := r.clock()
	r.warnMu.Lock()
	r.pendingDrops++
	if !r.lastWarn.IsZero() && now.Sub(r.lastWarn) < dropWarnEvery {
		r.warnMu.Unlock()
		return
	}
	n := r.pendingDrops
	r.pendingDrops = 0
	r.lastWarn = now
	r.warnMu.Unlock()
	r.logger.Warn("audit records dropped", "count", n, "reason", reason)
}

// Depth is the number of records accepted but not yet written or dropped.
func (r *Recorder) Depth() int {
	return int(max(0, r.accepted.Load()-r.processed.Load()))
}

// Dropped is the number of records lost so far: rejected by Record, or
// dropped after the sink kept failing.
func (r *Recorder) Dropped() uint64 {
	return r.dropped.Load()
}

func (r *Recorder) reportDepth() {
	if r.onDepth != nil {
		r.onDepth(r.Depth())
	}
}

// Flush writes at once, rather than after FlushInterval, everything recorded
// before the call, and waits until it is handled. It returns an error
// wrapping [ErrDropped] if records were dropped after write failures while
// it waited, or ctx's error if ctx ends first.
func (r *Recorder) Flush(ctx context.Context) error {
	target := r.accepted.Load()
	failedBefore := r.writeDropped.Load()
	select {
	case r.flushReq <- struct{}{}:
	default: // a request is already pending and will cover our records
	}
	if err := r.wait(ctx, target); err != nil {
		return fmt.Errorf("flushing audit records: %w", err)
	}
	if n := r.writeDropped.Load() - failedBefore; n > 0 {
		return fmt.Errorf("flushing audit records: %d %w after write failures", n, ErrDropped)
	}
	return nil
}

// wait blocks until the first target records are processed.
func (r *Recorder) wait(ctx context.Context, target int64) error {
	for {
		// Take the channel before reading processed: an advance in
		// between closes it, so no progress is missed.
		r.progMu.Lock()
		ch := r.progress
		r.progMu.Unlock()
		if r.processed.Load() >= target {
			return nil
		}
		select {
		case <-ch:
		case <-r.done:
			if r.processed.Load() >= target {
				return nil
			}
			return errors.New("audit writer stopped")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// advance marks n more records as handled and wakes Flush waiters.
func (r *Recorder) advance(n int) {
	r.processed.Add(int64(n))
	r.progMu.Lock()
	close(r.progress)
	r.progress = make(chan struct{})
	r.progMu.Unlock()
	r.reportDepth()
}

// Close stops accepting records (Record then returns false and counts a
// drop), writes what is queued, waits for RecordSync calls writing directly
// and stops the goroutines. If ctx ends first, Close cancels the sink's
// context, drops what is left and still waits for the goroutines and those
// calls, so none outlives it. It returns an error wrapping
// [ErrDropped] (and ctx's error, if that was the cause) when records were
// lost during the close, and nil otherwise. Close is idempotent; every call
// waits for the shutdown.
func (r *Recorder) Close(ctx context.Context) error {
	failedBefore := r.writeDropped.Load()
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.purgeCancel()
		close(r.quit)
	})
	var ctxErr error
	select {
	case <-r.done:
	default:
		select {
		case <-r.done:
		case <-ctx.Done():
			ctxErr = ctx.Err()
			r.cancel()
			<-r.done
		}
	}
	r.cancel()

	r.warnMu.Lock()
	n := r.pendingDrops
	r.pendingDrops = 0
	r.warnMu.Unlock()
	if n > 0 {
		r.logger.Warn("audit records dropped", "count", n, "reason", "queue full or closed")
	}
	if n := r.writeDropped.Load() - failedBefore; n > 0 {
		if ctxErr != nil {
			return fmt.Errorf("closing audit recorder: %d %w: %w", n, ErrDropped, ctxErr)
		}
		return fmt.Errorf("closing audit recorder: %d %w after write failures", n, ErrDropped)
	}
	return nil
}

// batch is records the writer prepared, with the RecordSync callers
// waiting for them, on their way to the committer.
type batch struct {
	recs    []Record
	waiters []chan error
}

// write is the writer goroutine: it takes records from the queue in order,
// derives their deferred fields and groups them into batches for the
// committer, which it owns. A batch goes to the committer when it is full,
// when a RecordSync caller or Flush waits for it, or FlushInterval after
// its first record; while the committer is storing one batch, the next one
// keeps growing (group commit) and its records are prepared meanwhile.
func (r *Recorder) write() {
	commits := make(chan batch) // unbuffered: taken when the committer is idle
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		for b := range commits {
			r.writeBatch(b.recs, b.waiters)
		}
	}()
	defer func() {
		close(commits)
		<-committed
	}()

	timer := time.NewTimer(r.flushInterval)
	timer.Stop()
	defer timer.Stop()
	var (
		cur   batch
		ready bool // cur goes to the committer as soon as it is idle
	)
	// commit hands cur to the committer, waiting for it if it is busy.
	commit := func() {
		timer.Stop()
		if len(cur.recs) > 0 {
			commits <- cur
		}
		cur, ready = batch{}, false
	}
	// add prepares e and appends it, committing the batch when it is full.
	add := func(e entry) {
		if len(cur.recs) == 0 {
			timer.Reset(r.flushInterval)
		}
		r.derive(&e.rec, e.derive)
		cur.recs = append(cur.recs, e.rec)
		if e.res != nil {
			cur.waiters = append(cur.waiters, e.res)
		}
		if len(cur.recs) >= r.batchSize {
			commit()
		}
	}
	// takeQueued adds what is queued now and marks the batch ready. It
	// takes only what is queued now: the records a Flush or RecordSync
	// waits for are ahead, and a busy producer must not keep the writer
	// draining for ever.
	takeQueued := func() {
		for range len(r.queue) {
			add(<-r.queue)
		}
		ready = len(cur.recs) > 0
	}
	for {
		var send chan batch
		if ready {
			send = commits
		}
		select {
		case send <- cur:
			timer.Stop()
			cur, ready = batch{}, false
		case e := <-r.queue:
			add(e)
			if e.res != nil {
				// Group commit: a caller is waiting, so commit as soon
				// as the committer is free, with whoever queued by then.
				takeQueued()
			}
		case <-timer.C:
			ready = len(cur.recs) > 0
		case <-r.flushReq:
			takeQueued()
		case <-r.quit:
			// Record sends nothing after Close set closed, so emptying
			// the queue once is enough.
			for {
				select {
				case e := <-r.queue:
					add(e)
				default:
					commit()
					return
				}
			}
		}
	}
}

// writeBatch writes batch, trying up to writeAttempts times with jittered
// exponential backoff, and drops it (logged, counted) if every try fails.
// Either way it then tells waiters the outcome.
func (r *Recorder) writeBatch(batch []Record, waiters []chan error) {
	attempts, err := r.writeRetrying(r.ctx, batch)
	if err != nil {
		// Log the count and cause only: records may hold secrets even redacted.
		r.logger.Error("audit batch dropped after write failures",
			"count", len(batch), "attempts", attempts, "err", err)
		r.countWriteDrops(len(batch))
		err = fmt.Errorf("writing audit records: %w: %w", ErrDropped, err)
	}
	r.advance(len(batch))
	for _, w := range waiters {
		w <- err
	}
}

// writeRetrying calls WriteAudit up to writeAttempts times, each bounded by
// WriteTimeout, with jittered exponential backoff between tries, until one
// succeeds or ctx ends. It returns the number of calls and the last error.
func (r *Recorder) writeRetrying(ctx context.Context, recs []Record) (attempts int, err error) {
	for attempts < writeAttempts {
		if ctx.Err() != nil {
			return attempts, ctx.Err()
		}
		if attempts > 0 && !r.sleep(ctx, attempts) {
			return attempts, ctx.Err()
		}
		attempts++
		callCtx, cancel := context.WithTimeout(ctx, r.writeTimeout)
		err = r.sink.WriteAudit(callCtx, recs)
		cancel()
		if err == nil {
			return attempts, nil
		}
	}
	return attempts, err
}

// countWriteDrops counts n records dropped after write failures.
func (r *Recorder) countWriteDrops(n int) {
	r.dropped.Add(uint64(n))
	r.writeDropped.Add(uint64(n))
	if r.onOverflow != nil {
		for range n {
			r.onOverflow()
		}
	}
}

// sleep waits before retry number attempt (1-based), doubling from
// retryBackoff with ×0.5–1.5 jitter. It reports false if ctx ended first.
func (r *Recorder) sleep(ctx context.Context, attempt int) bool {
	d := r.retryBackoff << (attempt - 1)
	d = time.Duration(float64(d) * (0.5 + rand.Float64()))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// purge is the purger goroutine: it deletes expired rows at start and every
// interval until Close cancels ctx.
func (r *Recorder) purge(ctx context.Context, retention, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		r.purgeOnce(ctx, retention)
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return
		}
	}
}

func (r *Recorder) purgeOnce(ctx context.Context, retention time.Duration) {
	before := r.clock().Add(-retention)
	callCtx, cancel := context.WithTimeout(ctx, r.writeTimeout)
	defer cancel()
	n, err := r.sink.PurgeAudit(callCtx, before)
	switch {
	case err == nil:
		r.logger.Info("purged audit records", "count", n, "before", before)
	case ctx.Err() != nil:
		// Closing: the purge was abandoned on purpose.
	default:
		r.logger.Warn("purging audit records", "before", before, "err", err)
	}
}
