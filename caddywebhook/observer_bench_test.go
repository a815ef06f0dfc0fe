package caddywebhook

import (
	"io"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddywebhook/caddywebhook/queue"
)

// BenchmarkJobFinished is the observer's work for one delivered job: its
// metrics, the live tail and the log line, written as JSON to nowhere.
func BenchmarkJobFinished(b *testing.B) {
	initMetrics()
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	o := &observer{logger: zap.New(core)}
	job := &queue.Job{ID: 42, Source: "gh", Target: "ci", DeliveryID: "d-42", EventType: "push", Attempt: 1}
	c := queue.Completion{JobID: 42, Status: queue.StatusDone, Duration: 3 * time.Millisecond, Now: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		o.JobFinished(job, c, true, nil)
	}
}
