// Package adminhook lets the dashboard call the webhook admin API's route
// table in-process without importing the package that holds it: that
// package installs its server here from its init function, and the
// dashboard serves through Serve. It is for the plugin's own packages, no
// part of its public API.
package adminhook

import (
	"net/http"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
)

var serve func(w http.ResponseWriter, r *http.Request, path string)

// Install sets the server of the admin API's endpoints. Call it from an
// init function.
func Install(f func(w http.ResponseWriter, r *http.Request, path string)) { serve = f }

// Serve answers r as the admin API's endpoint at path (/webhook/stats, …)
// would, errors included; a build without the admin API answers 503.
func Serve(w http.ResponseWriter, r *http.Request, path string) {
	if serve == nil {
		adminapi.WriteError(w, http.StatusServiceUnavailable, "this Caddy has no webhook admin API", "")
		return
	}
	serve(w, r, path)
}
