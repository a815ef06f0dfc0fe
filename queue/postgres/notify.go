package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// notifier sends the NOTIFYs that wake other instances' pools, coalesced:
// the first kick is announced at once, and kicks that arrive within
// interval of a NOTIFY share the next one, sent when interval has passed.
// A burst of commits therefore costs one NOTIFY per interval, and a lone
// commit is announced without delay.
type notifier struct {
	pool     *pgxpool.Pool
	channel  string
	payload  string
	interval time.Duration

	kicks    chan struct{} // buffered 1: a kick waiting for the next NOTIFY
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// notifyTimeout bounds one NOTIFY. A NOTIFY that fails is not retried:
// the other instances' polling finds the work, only later.
const notifyTimeout = 5 * time.Second

func newNotifier(pool *pgxpool.Pool, channel, payload string, interval time.Duration) *notifier {
	n := &notifier{
		pool:     pool,
		channel:  channel,
		payload:  payload,
		interval: interval,
		kicks:    make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go n.run()
	return n
}

// kick asks for a NOTIFY without blocking; kicks merge.
func (n *notifier) kick() {
	select {
	case n.kicks <- struct{}{}:
	default:
	}
}

// stop sends the NOTIFY still owed for a kick, if any, and ends the
// notifier. It is idempotent.
func (n *notifier) stop() {
	n.stopOnce.Do(func() { close(n.quit) })
	<-n.done
}

func (n *notifier) run() {
	defer close(n.done)
	timer := time.NewTimer(0)
	<-timer.C
	for {
		select {
		case <-n.kicks:
		case <-n.quit:
			n.flush()
			return
		}
		n.send()
		// Stay quiet for the interval; a kick meanwhile waits in the
		// buffer and is announced when it ends.
		timer.Reset(n.interval)
		select {
		case <-timer.C:
		case <-n.quit:
			timer.Stop()
			n.flush()
			return
		}
	}
}

// flush sends a NOTIFY if a kick is waiting.
func (n *notifier) flush() {
	select {
	case <-n.kicks:
		n.send()
	default:
	}
}

func (n *notifier) send() {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	// pg_notify takes the channel as a string, so nothing is spliced into
	// SQL; the payload tells the listeners which store sent it.
	_, _ = n.pool.Exec(ctx, "SELECT pg_notify($1, $2)", n.channel, n.payload)
}

// Listener timing. The connection is checked with a ping after healthEvery
// without a notification, so a connection that died silently (a network
// partition, a failover) is noticed and replaced rather than waited on
// forever. Reconnection backs off from minBackoff to maxBackoff, jittered,
// so instances that lost the server together do not return in lockstep.
const (
	pingTimeout   = 10 * time.Second
	dialTimeout   = 10 * time.Second
	minBackoff    = 100 * time.Millisecond
	maxBackoff    = 10 * time.Second
	closeListener = 2 * time.Second
)

// healthEvery is a variable so that a test can check the ping path
// without waiting half a minute; nothing else changes it.
var healthEvery = 30 * time.Second

// listener holds a dedicated connection that LISTENs on the channel and
// calls wake for every notification another store sent. If the connection
// is lost it is re-established, and wake is called once afterwards: what
// was notified meanwhile is gone, so the pool should look for work.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	self    string // this store's payload: its own NOTIFYs are not news
	wake    func()

	health     time.Duration // healthEvery when the listener was made
	pid        atomic.Uint32 // the backend serving the connection, for tests
	reconnects atomic.Int64  // connections re-established after a loss
	pings      atomic.Int64  // health checks that found the connection alive

	cancel context.CancelFunc
	done   chan struct{}
}

func newListener(cfg *pgx.ConnConfig, channel, self string, wake func()) *listener {
	return &listener{cfg: cfg, channel: channel, self: self, wake: wake, health: healthEvery, done: make(chan struct{})}
}

// start makes the first connection and LISTENs before it returns, so no
// notification committed afterwards is missed, then keeps listening in the
// background.
func (l *listener) start(ctx context.Context) error {
	conn, err := l.connect(ctx)
	if err != nil {
		close(l.done)
		return err
	}
	bg, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(bg, conn)
	return nil
}

// stop ends the listener and closes its connection.
func (l *listener) stop() {
	if l.cancel != nil {
		l.cancel()
	}
	<-l.done
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, fmt.Errorf("connect listener: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("listen: %w", err)
	}
	l.pid.Store(conn.PgConn().PID())
	return conn, nil
}

func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := minBackoff
	timer := time.NewTimer(0)
	<-timer.C
	for {
		if conn == nil {
			c, err := l.connect(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// Wait between half the backoff and the backoff.
				timer.Reset(backoff/2 + rand.N(backoff/2+1))
				select {
				case <-ctx.Done():
					timer.Stop()
					return
				case <-timer.C:
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			conn, backoff = c, minBackoff
			l.reconnects.Add(1)
			l.wake()
		}
		if err := l.wait(ctx, conn); err != nil {
			closeConn(conn)
			conn = nil
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// wait waits for one notification, or checks the connection after
// healthEvery of silence. An error means the connection is no longer
// usable, or ctx ended.
func (l *listener) wait(ctx context.Context, conn *pgx.Conn) error {
	wctx, cancel := context.WithTimeout(ctx, l.health)
	n, err := conn.WaitForNotification(wctx)
	cancel()
	switch {
	case err == nil:
		if n.Payload != l.self {
			l.wake()
		}
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
		// Silence: make sure the connection is still there. A
		// notification arriving meanwhile is kept by pgx for the next
		// WaitForNotification.
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		defer cancel()
		if err := conn.Ping(pctx); err != nil {
			return err
		}
		l.pings.Add(1)
		return nil
	}
	return err
}

// closeConn closes conn, giving the server a moment to hear the goodbye.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeListener)
	defer cancel()
	_ = conn.Close(ctx)
}
