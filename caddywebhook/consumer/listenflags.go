package consumer

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	httptarget "github.com/caddywebhook/caddywebhook/caddywebhook/targets/http"
	"github.com/caddywebhook/caddywebhook/signature"
)

// The flags of `caddy webhook listen` beyond one target and one URL:
// several targets, routes by event type, signing again as the provider
// signs, and a fresh secret for the app.

// listenRoutes reads --target, --forward-to, --resign and --secret-env
// into cfg.
func listenRoutes(cmd *cobra.Command, cfg *ListenConfig) error {
	f := cmd.Flags()
	targets, _ := f.GetString("target")
	for t := range strings.SplitSeq(targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.Targets = append(cfg.Targets, t)
		}
	}
	if len(cfg.Targets) == 0 {
		return errors.New("listen: --target is required")
	}
	cfg.Target = cfg.Targets[0]
	forwards, _ := f.GetStringArray("forward-to")
	for _, v := range forwards {
		r, err := ParseRoute(v)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		if len(r.Events) > 0 {
			cfg.Routes = append(cfg.Routes, r)
			continue
		}
		if cfg.ForwardTo != "" {
			return errors.New("listen: --forward-to: two URLs without event types; one is the default, give the others their types ('invoice.*=http://…')")
		}
		cfg.ForwardTo = r.URL
	}
	if cfg.ForwardTo == "" && len(cfg.Routes) == 0 {
		return errors.New("listen: --forward-to is required: the local URL to POST each event to")
	}
	scheme, _ := f.GetString("resign")
	env, _ := f.GetString("secret-env")
	switch {
	case scheme == "" && env != "":
		return errors.New("listen: --secret-env holds the secret of --resign: name the scheme too (--resign stripe)")
	case scheme == "":
		return nil
	case env == "":
		return fmt.Errorf("listen: --resign %s needs --secret-env, the variable that holds the secret your app verifies with "+
			"(make one with 'caddy webhook listen --print-secret --resign %s')", scheme, scheme)
	}
	secret := os.Getenv(env)
	if secret == "" {
		return fmt.Errorf("listen: --secret-env: the variable %s is not set or empty", env)
	}
	cfg.Resign = &httptarget.Resign{Scheme: scheme, Secret: secret}
	return nil
}

// printSecret prints a fresh secret for --resign's scheme, or a Standard
// Webhooks one, for the app's .env.
func printSecret(cmd *cobra.Command) error {
	scheme, _ := cmd.Flags().GetString("resign")
	if scheme == "" {
		scheme = signature.SchemeStandard
	}
	if _, ok := signature.Lookup(scheme); !ok {
		return fmt.Errorf("listen: --resign %q is unknown: use one of %s", scheme, strings.Join(signature.Schemes(), ", "))
	}
	secret, err := signature.NewSecret(scheme)
	if err != nil {
		return fmt.Errorf("listen: --resign: %w", err)
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), secret)
	return err
}
