package consumer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/subcommand"
)

func init() {
	subcommand.Register(listenCommand)
}

// listenCommand is `caddy webhook listen`.
func listenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "listen --url <consumer endpoint> --token-env <variable> --target <pull target> --forward-to <local url> [--concurrency <n>] [--sign-secret-env <variable>] [--timeout <duration>] [--wait <duration>] [--grace <duration>]",
		Short: "Receives a pull target's events from a remote Caddy and forwards each to a local URL",
		Long: `
Consumes a pull target (to pull { name … }) of a Caddy that can be reached,
through its webhook_consumer endpoint, and POSTs each event to a local app
with the headers the http target sends (X-Webhook-Delivery-Id, -Source,
-Event-Type, -Attempt, -Job-Id, -Replay), signed with Standard Webhooks
when --sign-secret-env names a secret. The app's answer decides, as for an
http target: 2xx done; 408, 425, 429 and 5xx retried with the target's
backoff (Retry-After honoured); other 4xx dead.

Nothing is lost while the laptop sleeps or the app is down: the events wait
in the server's queue. An app that refuses the connection is not the
event's fault: the job is handed back uncharged and the listener waits for
the app. Leases are extended while the app works; several listeners on one
target share the work; ordering keys keep their order. Ctrl-C stops
claiming, lets the requests the app already has finish within --grace
(their answers recorded), hands back the rest uncharged and says which it
did; a second Ctrl-C cuts the grace short. One line per delivery goes to stdout; notices
(connected, reconnecting, app down) to stderr.

The token is read from the environment variable --token-env names, never
from a flag, so it stays out of the shell's history and the process list.
`,
		Example: `  export LAPTOP_TOKEN=…
  caddy webhook listen --url https://hooks.example.com/consume --token-env LAPTOP_TOKEN \
      --target laptop --forward-to http://localhost:3000/webhooks`,
		Args: cobra.NoArgs,
		RunE: runListen,
	}
	f := cmd.Flags()
	f.String("url", "", "The webhook_consumer endpoint, e.g. https://hooks.example.com/consume")
	f.String("token-env", "", "The environment variable that holds the bearer token")
	f.String("target", "", "The pull target to consume")
	f.String("forward-to", "", "The local URL to POST each event to")
	f.Int("concurrency", DefaultConcurrency, "Deliveries to the local app at once")
	f.String("sign-secret-env", "", "The environment variable that holds a Standard Webhooks secret (whsec_…) to sign each forwarded request with")
	f.Duration("timeout", 10*time.Second, "How long one local request may take")
	f.Duration("wait", DefaultListenWait, "How long each claim waits on the server for events (at most a quarter of the server's lease)")
	f.Duration("grace", DefaultListenGrace, "On a stop, how long requests the app already has may finish before they are cut short and handed back")
	return cmd
}

func runListen(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	cfg := ListenConfig{Out: cmd.OutOrStdout(), Log: cmd.ErrOrStderr()}
	cfg.URL, _ = f.GetString("url")
	cfg.Target, _ = f.GetString("target")
	cfg.ForwardTo, _ = f.GetString("forward-to")
	cfg.Concurrency, _ = f.GetInt("concurrency")
	cfg.Timeout, _ = f.GetDuration("timeout")
	cfg.Wait, _ = f.GetDuration("wait")
	tokenEnv, _ := f.GetString("token-env")
	if tokenEnv == "" {
		return errors.New("listen: --token-env is required: the variable that holds the token")
	}
	cfg.Token = os.Getenv(tokenEnv)
	if cfg.Token == "" {
		return fmt.Errorf("listen: --token-env: the variable %s is not set or empty", tokenEnv)
	}
	if name, _ := f.GetString("sign-secret-env"); name != "" {
		if cfg.SignSecret = os.Getenv(name); cfg.SignSecret == "" {
			return fmt.Errorf("listen: --sign-secret-env: the variable %s is not set or empty", name)
		}
	}
	cfg.Grace, _ = f.GetDuration("grace")
	// The first interrupt stops: no more claims, the app's requests
	// finish within the grace. The second cuts the grace short, as CLIs do.
	ctx, stop := context.WithCancel(cmd.Context())
	defer stop()
	abort := make(chan struct{})
	cfg.Abort = abort
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	returned := make(chan struct{})
	defer close(returned)
	go func() {
		select {
		case <-sigs:
		case <-returned:
			return
		}
		stop()
		select {
		case <-sigs:
			close(abort)
		case <-returned:
		}
	}()
	return Listen(ctx, cfg)
}
