package queue

// Observer receives the pool's events, for metrics and logs: the queue
// package logs nothing itself. Methods are called from many goroutines at
// once and must not block. Every JobStarted is followed by exactly one
// JobFinished or JobHandedBack for that job. A job claimed ahead, waiting
// for a worker, has no events until it starts: if its lease is lost first it
// gets LeaseLost only, and if Stop hands it back first it gets none. Embed
// NopObserver to implement only some methods and stay compatible when
// methods are added.
type Observer interface {
	// JobStarted is called before the handler runs.
	JobStarted(job *Job)
	// JobFinished is called once the handler has returned err and c has been
	// sent to the store. recorded is false when nothing was written: the
	// lease was lost (reported by LeaseLost too, and then Finish is not
	// called at all), the fence in Finish rejected c, or Finish failed
	// (reported by StoreError too). c.Error holds err's text.
	JobFinished(job *Job, c Completion, recorded bool, err error)
	// JobHandedBack is called when the pool stopped while the handler ran
	// and the job went back to pending without a charged attempt. Jobs
	// claimed ahead and not yet started are handed back too, but not
	// reported: no delivery was attempted.
	JobHandedBack(job *Job)
	// LeaseLost is called when the pool can no longer prove it holds the
	// job's lease while its handler runs: an extension found the claim
	// gone, the lease came within a quarter of its end unextended, or the
	// pool claimed the job again after its lease ran out (a pause). The
	// handler's ctx is cancelled.
	// It is also called for a job claimed ahead whose lease is lost before
	// it started, and for a job whose claim was answered too close to the
	// end of its lease to start (a stalled store, a pause): that job is
	// dropped or handed back, never started, and no JobFinished follows.
	LeaseLost(job *Job)
	// StoreError is called when a store operation fails; op is one of
	// "claim", "extend leases", "finish", "hand back".
	StoreError(op string, err error)
}

// NopObserver implements Observer with methods that do nothing.
type NopObserver struct{}

// JobStarted does nothing.
func (NopObserver) JobStarted(*Job) {}

// JobFinished does nothing.
func (NopObserver) JobFinished(*Job, Completion, bool, error) {}

// JobHandedBack does nothing.
func (NopObserver) JobHandedBack(*Job) {}

// LeaseLost does nothing.
func (NopObserver) LeaseLost(*Job) {}

// StoreError does nothing.
func (NopObserver) StoreError(string, error) {}
