package caddywebhook

// The observer: what the pool and the housekeeper report, turned into
// log lines, metrics, tail lines, notices and Caddy events, with the
// attempt words they all share.

import (
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/notify"
	"github.com/caddywebhook/caddywebhook/queue"
)

// attemptOutcome is the attempt word of a recorded attempt after which its
// job's status became status. The stores record that status in the
// history (and rows already stored keep it), so it is mapped here, where
// the logs get their word too.
func attemptOutcome(status queue.Status) string {
	switch status {
	case queue.StatusDone:
		return adminapi.AttemptDelivered
	case queue.StatusPending:
		return adminapi.AttemptRetry
	case queue.StatusDead:
		return adminapi.AttemptDead
	case queue.StatusRunning:
		// A hand-back records the attempt with the job still running.
		return adminapi.AttemptHandedBack
	}
	return string(status)
}

// maxLoggedError bounds the error text of a delivery in logs and tail
// lines, which queue.SafeLine makes one line. The text comes from the
// target (an HTTP status, an exit code and the tail of a program's
// output), which targets keep free of secrets and headers.
const maxLoggedError = 512

// observer turns the pool's and the housekeeper's events into logs and
// metrics. It logs identifiers and outcome words, never payloads, headers
// or secrets.
type observer struct {
	queue.NopObserver
	logger   *zap.Logger
	notifier *notify.Notifier // nil without notifications
	events   *caddyEvents     // nil without Caddy's events app
}

func jobFields(job *queue.Job, extra ...zap.Field) []zap.Field {
	ids := [...]zap.Field{
		zap.String("source", job.Source),
		zap.String("target", job.Target),
		zap.Int64("job_id", job.ID),
		zap.String("delivery_id", job.DeliveryID),
		zap.String("event_type", job.EventType),
		zap.Int("attempt", job.Attempt),
	}
	// Room for what JobFinished may still add (an error, and a next
	// attempt or a note), so its line costs one slice, not a second.
	fields := make([]zap.Field, 0, len(ids)+len(extra)+2)
	return append(append(fields, ids[:]...), extra...)
}

// JobFinished implements queue.Observer.
func (o *observer) JobFinished(job *queue.Job, c queue.Completion, recorded bool, err error) {
	word, level := attemptOutcome(c.Status), zapcore.InfoLevel
	switch {
	case !recorded:
		word, level = adminapi.AttemptLeaseLost, zapcore.WarnLevel
	case c.Status == queue.StatusPending:
		level = zapcore.WarnLevel
	case c.Status == queue.StatusDead:
		level = zapcore.ErrorLevel
	}
	webhookMetrics.deliveries.WithLabelValues(job.Source, job.Target, word).Inc()
	tails.publishDelivery(job, word, c.Duration, c.Error)
	if recorded && c.Status == queue.StatusDead {
		if o.notifier != nil {
			o.notifier.JobDead(job, c)
		}
		o.events.jobDead(job, c)
	}
	if recorded {
		webhookMetrics.duration.WithLabelValues(job.Source, job.Target).Observe(c.Duration.Seconds())
		if c.Status == queue.StatusDone {
			observeDelivered(job, c)
		}
	}
	ce := o.logger.Check(level, word)
	if ce == nil {
		return
	}
	fields := jobFields(job, zap.String("outcome", word), zap.Duration("duration", c.Duration))
	if c.Status == queue.StatusPending && recorded {
		fields = append(fields, zap.Time("next_attempt", c.RunAt))
	}
	if c.Error != "" {
		fields = append(fields, zap.String("error", queue.SafeLine(c.Error, maxLoggedError)))
	}
	if !recorded && err == nil {
		fields = append(fields, zap.String("note", "delivered, but the job was no longer ours to record; it may be delivered again"))
	}
	ce.Write(fields...)
}

// JobHandedBack implements queue.Observer.
func (o *observer) JobHandedBack(job *queue.Job) {
	webhookMetrics.deliveries.WithLabelValues(job.Source, job.Target, adminapi.AttemptHandedBack).Inc()
	tails.publishDelivery(job, adminapi.AttemptHandedBack, 0, "")
	o.logger.Info(adminapi.AttemptHandedBack, jobFields(job, zap.String("outcome", adminapi.AttemptHandedBack))...)
}

// LeaseLost implements queue.Observer. For a job whose delivery started,
// the attempt's JobFinished follows and counts it; a job claimed ahead and
// lost before it started was never delivered, and is only logged.
func (o *observer) LeaseLost(job *queue.Job) {
	o.logger.Warn("lease lost; delivery cancelled", jobFields(job, zap.String("outcome", adminapi.AttemptLeaseLost))...)
}

// StoreError implements queue.Observer and queue.HousekeeperObserver.
func (o *observer) StoreError(op string, err error) {
	o.logger.Error("queue store error", zap.String("op", op), zap.Error(err))
}

// Purged implements queue.HousekeeperObserver.
func (o *observer) Purged(jobs int, cutoff time.Time) {
	if jobs > 0 {
		o.logger.Info("purged delivered jobs", zap.Int("jobs", jobs), zap.Time("finished_before", cutoff))
	}
}

// Interface guards
var (
	_ queue.Observer            = (*observer)(nil)
	_ queue.HousekeeperObserver = (*observer)(nil)
)
