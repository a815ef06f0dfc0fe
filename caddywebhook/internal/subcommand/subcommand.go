// Package subcommand lets the plugin's packages add a subcommand to
// `caddy webhook` (the consumer package's listen) without the CLI
// importing them: each registers a builder from its init function, and
// the CLI adds what they built when Caddy builds its command tree, after
// every init. It is for the plugin's own packages, no part of its public
// API.
package subcommand

import "github.com/spf13/cobra"

var builders []func() *cobra.Command

// Register adds the command build returns to `caddy webhook`. Call it from
// an init function.
func Register(build func() *cobra.Command) {
	builders = append(builders, build)
}

// All returns the registered builders, in the order they were registered.
func All() []func() *cobra.Command { return builders }
