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
		Use:   "listen --url <consumer endpoint> --token-env <variable> --target <pull target>[,<pull target>…] --forward-to [<types>=]<local url>… [--resign <scheme> --secret-env <variable> | --sign-secret-env <variable>] [--concurrency <n>] [--timeout <duration>] [--wait <duration>] [--grace <duration>] | listen --print-secret [--resign <scheme>]",
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

--forward-to may be repeated with event types before '=': each event goes
to the first route whose types take it (a type, or a prefix and '*', as
'invoice.*'; several joined by commas), else to the --forward-to without
types, the default. An event that no route takes and no default gets is
held: its line says so, the listener keeps it (nothing is dropped, nothing
charged) and hands it back when it stops; restart listen with a route or a
default for it. --target a,b consumes several pull targets at once; each
line names its target.

With --resign <scheme> --secret-env VAR, each request is signed as the
provider of the scheme signs it (stripe, github, standard, shopify, slack,
twilio, …) with the secret in VAR, and carries the provider's headers, so
an app that verifies with the provider's SDK runs unchanged with that secret
in its .env. --print-secret prints a fresh secret in the form the scheme's
SDK expects (whsec_… for Stripe and Standard Webhooks) and exits; without
--resign, a Standard Webhooks one for --sign-secret-env.

The token and secrets are read from the environment variables the *-env
flags name, never from a flag, so they stay out of the shell's history and
the process list.
`,
		Example: `  export LAPTOP_TOKEN=…
  caddy webhook listen --url https://hooks.example.com/consume --token-env LAPTOP_TOKEN \
      --target laptop --forward-to http://localhost:3000/webhooks

  # An app that verifies Stripe's signature: its secret, and the events signed with it.
  caddy webhook listen --print-secret --resign stripe      # put it in the app's .env as STRIPE_WEBHOOK_SECRET
  caddy webhook listen --url https://hooks.example.com/consume --token-env LAPTOP_TOKEN --target laptop \
      --resign stripe --secret-env STRIPE_WEBHOOK_SECRET --forward-to http://localhost:3000/webhooks/stripe

  # Billing events to one app, the rest to another, from two targets.
  caddy webhook listen --url https://hooks.example.com/consume --token-env LAPTOP_TOKEN --target stripe-dev,github-dev \
      --forward-to 'invoice.*,customer.subscription.*=http://localhost:3000/billing' --forward-to http://localhost:4000/hooks`,
		Args: cobra.NoArgs,
		RunE: runListen,
	}
	f := cmd.Flags()
	f.String("url", "", "The webhook_consumer endpoint, e.g. https://hooks.example.com/consume")
	f.String("token-env", "", "The environment variable that holds the bearer token")
	f.String("target", "", "The pull target to consume; several separated by commas")
	f.StringArray("forward-to", nil, "The local URL to POST each event to; with types before '=' ('invoice.*=http://…') a route for them (repeatable)")
	f.String("resign", "", "Sign each request as the sender of this scheme signs it (stripe, github, standard, shopify, slack, twilio, …), with the secret --secret-env names")
	f.String("secret-env", "", "With --resign: the environment variable that holds the secret the app verifies with")
	f.Bool("print-secret", false, "Print a fresh secret for --resign's scheme (or a Standard Webhooks one) and exit")
	f.Int("concurrency", DefaultConcurrency, "Deliveries to the local app at once, per target")
	f.String("sign-secret-env", "", "The environment variable that holds a Standard Webhooks secret (whsec_…) to sign each forwarded request with")
	f.Duration("timeout", 10*time.Second, "How long one local request may take")
	f.Duration("wait", DefaultListenWait, "How long each claim waits on the server for events (at most a quarter of the server's lease)")
	f.Duration("grace", DefaultListenGrace, "On a stop, how long requests the app already has may finish before they are cut short and handed back")
	return cmd
}

func runListen(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	if print, _ := f.GetBool("print-secret"); print {
		return printSecret(cmd)
	}
	cfg := ListenConfig{Out: cmd.OutOrStdout(), Log: cmd.ErrOrStderr()}
	cfg.URL, _ = f.GetString("url")
	if err := listenRoutes(cmd, &cfg); err != nil {
		return err
	}
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
