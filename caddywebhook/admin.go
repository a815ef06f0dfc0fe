package caddywebhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/adminhook"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/search"
	"github.com/caddywebhook/caddywebhook/queue"
)

func init() {
	caddy.RegisterModule(adminAPI{})
	adminhook.Install(serveAdmin)
}

// adminAPI serves the webhook queue under /webhook/ on Caddy's admin
// endpoint: stats, listing, one job in full, replay of one or of every dead
// job, discard of one job or of every job matching a filter, and purge. It acts on the running webhook app
// (its runningConfig), looked up per request, because the admin server outlives
// config reloads while the app it should talk to changes.
//
// Nothing it returns can hold a secret: the store never sees one. A job's
// payload and forwarded headers are returned only by GET /webhook/jobs/{id}.
type adminAPI struct {
	// now is the clock for stats and purge cutoffs; nil means time.Now.
	now func() time.Time
	// mux dispatches routes(); Routes builds it.
	mux *http.ServeMux
	// running returns the config the API acts on; nil means the running
	// app's (current). Tests give each API a config of its own.
	running func() *runningConfig
	// search bounds one request of a search by content; zero fields take
	// the defaults (search.go).
	search search.Budget
}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.webhook",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Routes returns the one route that serves every /webhook/ endpoint:
// adminRoutes, dispatched by an http.ServeMux of their own, so that an
// error is answered as JSON naming its parameter, and an unknown path or
// method with the API's own 404 or 405 (with Allow) instead of the mux's
// text.
func (a *adminAPI) Routes() []caddy.AdminRoute {
	a.mux = a.newMux()
	return []caddy.AdminRoute{{
		Pattern: adminapi.BasePath,
		Handler: caddy.AdminHandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			if err := a.serveWebhook(w, r); err != nil {
				status := writeAPIError(w, err)
				// Logged as Caddy's admin server logs the errors it answers.
				caddy.Log().Named("admin.api").Error("request error", zap.Error(err), zap.Int("status_code", status))
			}
			return nil
		}),
	}}
}

// adminRoute is one endpoint: its method and path (an http.ServeMux
// pattern, where {job} and {event} are ids), its handler, and the query
// parameters it accepts, so a misspelt filter (?sorce=github on a bulk
// replay) is refused instead of silently widening the operation.
type adminRoute struct {
	pattern string
	handle  queueHandler
	params  []string
}

// queueHandler serves one endpoint on the active queue; id is the job or
// event id from the path, or 0 for the endpoints without one.
type queueHandler func(w http.ResponseWriter, r *http.Request, q *runningConfig, id int64) error

// routes is the admin API, one line an endpoint (docs/ADMIN.md).
func (a *adminAPI) routes() []adminRoute {
	filter := []string{"status", "source", "target"}
	return []adminRoute{
		{"GET /webhook/stats", a.handleStats, nil},
		{"GET /webhook/jobs", a.handleList, append(slices.Clip(filter), "limit", "cursor", "event_type", "delivery_id", "since", "until", "where")},
		{"GET /webhook/jobs/{job}", a.handleGet, nil},
		{"DELETE /webhook/jobs/{job}", a.handleDiscard, nil},
		{"POST /webhook/jobs/{job}/replay", a.handleReplay, nil},
		{"POST /webhook/jobs/{job}/resend", a.handleResend, nil},
		{"POST /webhook/replay", a.handleReplayDead, append(slices.Clip(filter), replayQueryParams...)},
		{"POST /webhook/discard", a.handleDiscardJobs, append(slices.Clip(filter), "unroutable")},
		{"POST /webhook/purge", a.handlePurge, []string{"older_than"}},
		{"GET /webhook/events", a.handleEvents, []string{"source", "delivery_id", "event_type", "since", "until", "has_target", "limit", "cursor", "where"}},
		{"GET /webhook/events/{event}", a.handleEvent, nil},
		{"POST /webhook/events/{event}/send", a.handleSendEvent, []string{"target"}},
		{"POST /webhook/send", a.handleInject, nil},
		{"GET /webhook/tail", a.handleTail, []string{"source", "target", "outcome"}},
		{"POST /webhook/pause", a.handlePause, []string{"source", "target"}},
		{"POST /webhook/resume", a.handleResume, []string{"source", "target"}},
		{"POST /webhook/rules/test", a.handleRulesTest, nil},
		{"POST /webhook/rekey", a.handleRekey, []string{"to_plain_text", "no_vacuum"}},
		{"GET /webhook/rekey", a.handleRekey, nil},
		{"DELETE /webhook/rekey", a.handleRekey, nil},
	}
}

// newMux mounts the routes, and under them the catch-all that answers a
// path no route has (404) or a method its route does not take (405).
func (a *adminAPI) newMux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			rw := w.(*routedWriter)
			rw.err = a.serveRoute(rt, rw.ResponseWriter, r)
		})
	}
	mux.HandleFunc(adminapi.BasePath, func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		probe := *r
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			probe.Method = m
			if _, pattern := mux.Handler(&probe); pattern != adminapi.BasePath {
				allow = append(allow, m)
				if m == http.MethodGet {
					allow = append(allow, http.MethodHead) // the mux serves HEAD with GET
				}
			}
		}
		rw := w.(*routedWriter)
		if len(allow) == 0 {
			rw.err = apiError(http.StatusNotFound, "no webhook admin endpoint at %s", r.URL.Path)
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		rw.err = apiError(http.StatusMethodNotAllowed, "method %s not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, " or "))
	})
	return mux
}

// routedWriter carries a route's error out of the mux, to be answered by
// the caller of serveWebhook.
type routedWriter struct {
	http.ResponseWriter
	err error
}

// serveRoute runs the route's handler on the running config, after the
// checks every route makes: the id in the path, the query parameters, a
// running app.
func (a *adminAPI) serveRoute(rt adminRoute, w http.ResponseWriter, r *http.Request) error {
	var id int64
	var err error
	if s := r.PathValue("job"); s != "" {
		id, err = parseID(s, "job")
	} else if s := r.PathValue("event"); s != "" {
		id, err = parseID(s, "event")
	}
	if err != nil {
		return err
	}
	if err := checkParams(r.URL.Query(), rt.params); err != nil {
		return err
	}
	q := a.config()
	if q == nil {
		return apiError(http.StatusServiceUnavailable, "no webhook app is running (add the global option `webhook` or a webhook_receiver to the config)")
	}
	return rt.handle(w, r, q, id)
}

// serveWebhook serves one request of the admin API and returns its error
// for the caller to answer with writeAPIError.
func (a *adminAPI) serveWebhook(w http.ResponseWriter, r *http.Request) error {
	rw := &routedWriter{ResponseWriter: w}
	a.mux.ServeHTTP(rw, r)
	return rw.err
}

// serveAdmin serves the /webhook/ endpoint at path (/webhook/stats, …)
// in-process, exactly as the admin server would, and answers its error.
// The dashboard calls it through adminhook, so the page reaches every
// operation without Caddy's admin port being exposed, and the two can never
// disagree.
func serveAdmin(w http.ResponseWriter, r *http.Request, path string) {
	r = r.Clone(r.Context())
	r.URL.Path, r.URL.RawPath = path, ""
	err := dashboardAdmin().serveWebhook(w, r)
	if err == nil {
		return
	}
	if apiErr := (caddy.APIError{}); errors.As(err, &apiErr) && apiErr.HTTPStatus == 499 {
		return // the client went away; nobody to answer
	}
	writeAPIError(w, err)
}

func (a *adminAPI) handleStats(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	st, err := q.Store.Stats(r.Context(), a.clock())
	if err != nil {
		return storeError(0, err)
	}
	pauses, err := q.Store.ListPauses(r.Context())
	if err != nil {
		return storeError(0, err)
	}
	set := queue.NewPauses(pauses)
	resp := adminapi.StatsResponse{Stats: st, Counts: make([]adminapi.StatsCount, len(st.Counts)), Pauses: pauses, Lag: recentLags.snapshot(a.clock())}
	if resp.Lag == nil {
		resp.Lag = []adminapi.RecentLag{}
	}
	if resp.Pauses == nil {
		resp.Pauses = []queue.Pause{}
	}
	var circuits map[queue.Route]queue.CircuitState
	if q.Circuits != nil {
		circuits = q.Circuits()
	}
	for i, c := range st.Counts {
		resp.Counts[i] = adminapi.StatsCount{
			Count:      c,
			Unroutable: !q.routable(c.Source, c.Target),
			Paused:     set.Paused(queue.Route{Source: c.Source, Target: c.Target}),
		}
		if state, ok := circuits[queue.Route{Source: c.Source, Target: c.Target}]; ok {
			resp.Counts[i].Circuit = state.String()
		}
		if resp.Counts[i].Unroutable && c.Status == queue.StatusPending {
			resp.Unroutable += c.Jobs
		}
	}
	if st.OldestPending > 0 {
		resp.OldestPendingText = st.OldestPending.Round(time.Second).String()
	}
	return adminapi.WriteJSON(w, http.StatusOK, resp)
}

func (a *adminAPI) handleList(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	query := r.URL.Query()
	if query.Has("where") {
		return a.handleJobSearch(w, r, q)
	}
	p := queue.ListParams{Filter: queue.Filter{Target: query.Get("target")}}
	if s := query.Get("status"); s != "" {
		p.Status = queue.Status(s)
		if !p.Status.Valid() {
			return badParam("status", "must be pending, blocked, running, done or dead, not %q", s)
		}
	}
	var err error
	if p.Limit, p.Cursor, err = pageParams(query.Get); err != nil {
		return err
	}
	f, err := a.parseEventFilter(query.Get)
	if err != nil {
		return err
	}
	p.Source, p.EventType, p.DeliveryID, p.Since, p.Until = f.Source, f.EventType, f.DeliveryID, f.Since, f.Until
	page, err := q.Store.ListJobs(r.Context(), p)
	if err != nil {
		return storeError(0, err)
	}
	if len(page.Jobs) == 0 && p.Source != "" {
		if err := a.knownSource(r.Context(), q, p.Source); err != nil {
			return err
		}
	}
	if page.Jobs == nil {
		page.Jobs = []queue.JobSummary{}
	}
	return adminapi.WriteJSON(w, http.StatusOK, page)
}

// knownSource refuses, as a bad parameter, a source that is neither in the
// running config nor in any job, so that a misspelt filter does not look
// like a source with no jobs. The stats it reads cost the same however
// many jobs there are.
func (a *adminAPI) knownSource(ctx context.Context, q *runningConfig, source string) error {
	if slices.ContainsFunc(q.Routes, func(rt queue.Route) bool { return rt.Source == source }) {
		return nil
	}
	st, err := q.Store.Stats(ctx, a.clock())
	if err != nil {
		return storeError(0, err)
	}
	if slices.ContainsFunc(st.Counts, func(c queue.Count) bool { return c.Source == source && c.Jobs > 0 }) {
		return nil
	}
	return badParam("source", "%q is not a source of the running config, and no job has it", source)
}

func (a *adminAPI) handleGet(w http.ResponseWriter, r *http.Request, q *runningConfig, id int64) error {
	job, err := q.Store.GetJob(r.Context(), id)
	if err != nil {
		return storeError(id, err)
	}
	if job.Headers == nil {
		job.Headers = []queue.Header{}
	}
	resp := adminapi.JobResponse{JobDetail: job, History: make([]adminapi.AttemptResponse, len(job.History))}
	for i, a := range job.History {
		resp.History[i] = adminapi.AttemptResponse{Attempt: a, Outcome: attemptOutcome(a.Outcome)}
	}
	if utf8.Valid(job.Payload) {
		resp.PayloadText = string(job.Payload)
	}
	resp.Filter = q.filterTook(queue.Route{Source: job.Source, Target: job.Target})
	return adminapi.WriteJSON(w, http.StatusOK, resp)
}

func (a *adminAPI) handleReplay(w http.ResponseWriter, r *http.Request, q *runningConfig, id int64) error {
	if err := q.Store.Replay(r.Context(), id); err != nil {
		return storeError(id, err)
	}
	return adminapi.WriteJSON(w, http.StatusOK, adminapi.ReplayResponse{ID: id, Replayed: 1})
}

// replayQueryParams are the parameters of a replay by query, beyond the
// bulk replay's status, source and target (replay_query.go).
var replayQueryParams = []string{"where", "event_type", "since", "until", "dry_run", "show_request", "rate", "due", "limit", "cursor"}

func (a *adminAPI) handleReplayDead(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	query := r.URL.Query()
	if query.Has("where") {
		return a.handleReplayQuery(w, r, q)
	}
	for _, name := range replayQueryParams {
		if query.Has(name) {
			return badParam(name, "goes with where, a replay by query (where=true takes every event)")
		}
	}
	// Only dead jobs can be replayed; status is required anyway so that the
	// request says what it does, and so a later widening cannot change the
	// meaning of an old script.
	switch s := query.Get("status"); s {
	case string(queue.StatusDead):
	case "":
		return badParam("status", "is required and must be dead")
	default:
		return badParam("status", "must be dead, not %q: only dead jobs can be replayed", s)
	}
	routes, err := a.matching(r.Context(), q, queue.StatusDead, query.Get("source"), query.Get("target"))
	if err != nil {
		return storeError(0, err)
	}
	var resp adminapi.ReplayResponse
	for _, c := range routes {
		if !q.routable(c.Source, c.Target) {
			resp.Unroutable += c.Jobs
			continue
		}
		n, err := q.Store.ReplayDead(r.Context(), queue.Filter{Source: c.Source, Target: c.Target})
		resp.Replayed += n
		if err != nil {
			a.auditReplayDead(q, query.Get("source"), query.Get("target"), resp, err)
			// Chunks already committed stay replayed; say how many.
			return storeError(0, fmt.Errorf("replay dead jobs (%d replayed before the error): %w", resp.Replayed, err))
		}
	}
	a.auditReplayDead(q, query.Get("source"), query.Get("target"), resp, nil)
	return adminapi.WriteJSON(w, http.StatusOK, resp)
}

// auditReplayDead logs one line and emits one Caddy event for a bulk
// replay of dead jobs, as for a replay by query.
func (a *adminAPI) auditReplayDead(q *runningConfig, source, target string, resp adminapi.ReplayResponse, err error) {
	fields := []zap.Field{zap.String("source", source), zap.String("target", target), zap.String("status", string(queue.StatusDead)),
		zap.Int("replayed", resp.Replayed), zap.Int64("unroutable", resp.Unroutable)}
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	adminLogger().Info("webhook dead jobs replayed", fields...)
	q.events.emit(EventBulkReplay, map[string]any{"source": source, "target": target, "status": string(queue.StatusDead),
		"replayed": resp.Replayed, "unroutable": resp.Unroutable})
}

// matching returns the counts of status whose route matches source and
// target (empty: any), from the store's stats, which cost the same however
// many jobs there are. The bulk operations act route by route.
func (a *adminAPI) matching(ctx context.Context, q *runningConfig, status queue.Status, source, target string) ([]queue.Count, error) {
	st, err := q.Store.Stats(ctx, a.clock())
	if err != nil {
		return nil, err
	}
	var out []queue.Count
	for _, c := range st.Counts {
		if c.Status == status && c.Jobs > 0 && (source == "" || c.Source == source) && (target == "" || c.Target == target) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (a *adminAPI) handleDiscard(w http.ResponseWriter, r *http.Request, q *runningConfig, id int64) error {
	if err := q.Store.Discard(r.Context(), id); err != nil {
		return storeError(id, err)
	}
	return adminapi.WriteJSON(w, http.StatusOK, adminapi.DiscardResponse{ID: id, Discarded: true})
}

// handleDiscardJobs deletes the pending and dead jobs matching the filter
// (status narrows it to one of the two), route by route, each in chunks.
// It needs a source or unroutable=true, so that no request deletes every
// job of every route by leaving a parameter out; unroutable=true keeps
// only the routes the running config does not have.
func (a *adminAPI) handleDiscardJobs(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	query := r.URL.Query()
	source, target := query.Get("source"), query.Get("target")
	statuses := []queue.Status{queue.StatusPending, queue.StatusDead}
	switch s := query.Get("status"); s {
	case "":
	case string(queue.StatusPending), string(queue.StatusDead):
		statuses = []queue.Status{queue.Status(s)}
	default:
		return badParam("status", "must be pending or dead, not %q: running jobs cannot be discarded, done jobs are purged", s)
	}
	unroutable := false
	switch s := query.Get("unroutable"); s {
	case "", "false":
	case "true":
		unroutable = true
	default:
		return badParam("unroutable", "must be true or false, not %q", s)
	}
	if source == "" && !unroutable {
		return badParam("source", "is required unless unroutable=true: a bulk discard names what it deletes")
	}
	var resp adminapi.DiscardJobsResponse
	for _, status := range statuses {
		routes, err := a.matching(r.Context(), q, status, source, target)
		if err != nil {
			return storeError(0, err)
		}
		for _, c := range routes {
			if unroutable && q.routable(c.Source, c.Target) {
				continue
			}
			n, err := q.Store.DiscardJobs(r.Context(), queue.Filter{Status: status, Source: c.Source, Target: c.Target})
			resp.Discarded += n
			if err != nil {
				// Chunks already committed stay deleted; say how many.
				return storeError(0, fmt.Errorf("discard jobs (%d discarded before the error): %w", resp.Discarded, err))
			}
		}
	}
	return adminapi.WriteJSON(w, http.StatusOK, resp)
}

func (a *adminAPI) handlePurge(w http.ResponseWriter, r *http.Request, q *runningConfig, _ int64) error {
	olderThan := q.Retention
	if s := r.URL.Query().Get("older_than"); s != "" {
		d, err := caddy.ParseDuration(s)
		if err != nil || d <= 0 {
			return badParam("older_than", "must be a positive duration such as 72h or 7d, not %q", s)
		}
		olderThan = d
	}
	if olderThan <= 0 {
		// Done jobs are the dedupe memory; never purge all of them by default.
		return badParam("older_than", "is required: the webhook app has no retention configured")
	}
	cutoff := a.clock().Add(-olderThan)
	// The store cuts the purge into short transactions, as for the
	// housekeeper's passes.
	total, err := q.Store.Purge(r.Context(), cutoff, math.MaxInt)
	if err != nil {
		// Batches already committed stay purged; say how many.
		return storeError(0, fmt.Errorf("purge done jobs (%d purged before the error): %w", total, err))
	}
	return adminapi.WriteJSON(w, http.StatusOK, adminapi.PurgeResponse{Purged: total, Cutoff: cutoff.UTC(), OlderThan: olderThan.String()})
}

// config returns the config the API acts on, nil when no webhook app runs.
func (a *adminAPI) config() *runningConfig {
	if a.running != nil {
		return a.running()
	}
	return current.Load()
}

func (a *adminAPI) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

// checkParams refuses query parameters the endpoint does not know.
func checkParams(q url.Values, allowed []string) error {
	for name := range q {
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return badParam(name, "is not accepted here: this endpoint takes no query parameters")
			}
			return badParam(name, "is unknown here; accepted: %s", strings.Join(allowed, ", "))
		}
	}
	return nil
}

// parseID reads the id in a path; kind, "job" or "event", names it in
// the error.
func parseID(s, kind string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, badParam("id", "must be a positive %s id, not %q", kind, s)
	}
	return id, nil
}

// storeError maps the store's errors to HTTP statuses; id, when not 0,
// names the job in the message. The store's errors already name the
// operation ("read stats: …"), so they are not wrapped again. Any other
// failure of the store is 503, as the receiver answers when it cannot
// store: the database is unavailable, and the request may be retried.
func storeError(id int64, err error) error {
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return apiError(http.StatusNotFound, "job %d not found", id)
	case errors.Is(err, queue.ErrNotDead):
		return apiError(http.StatusConflict, "job %d is not dead; only dead jobs can be replayed", id)
	case errors.Is(err, queue.ErrRunning):
		return apiError(http.StatusConflict, "job %d is running; wait for the attempt to finish", id)
	case errors.Is(err, context.Canceled):
		// The client went away; the status is for the log only.
		return caddy.APIError{HTTPStatus: 499, Err: err}
	}
	return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: err}
}

// badParam is a 400 about the query parameter name, which the answer names
// in its param field for clients to read.
func badParam(name, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: http.StatusBadRequest,
		Err: paramError{param: name, err: fmt.Errorf("invalid parameter "+name+": "+format, args...)}}
}

// boolParam reads a boolean query parameter: true, false or absent.
func boolParam(get func(string) string, name string) (bool, error) {
	switch v := get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, badParam(name, "must be true or false, not %q", v)
	}
}

// paramError is an error about one request parameter.
type paramError struct {
	param string
	err   error
}

func (e paramError) Error() string { return e.err.Error() }
func (e paramError) Unwrap() error { return e.err }

// writeAPIError answers err, a caddy.APIError or else a 500, as JSON and
// returns the status it wrote.
func writeAPIError(w http.ResponseWriter, err error) int {
	var apiErr caddy.APIError
	if !errors.As(err, &apiErr) {
		apiErr = caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	msg := apiErr.Message
	if msg == "" && apiErr.Err != nil {
		msg = apiErr.Err.Error()
	}
	// caddy.APIError does not unwrap: look inside it.
	var pe paramError
	if !errors.As(err, &pe) {
		errors.As(apiErr.Err, &pe)
	}
	status := cmp.Or(apiErr.HTTPStatus, http.StatusInternalServerError)
	adminapi.WriteError(w, status, msg, pe.param)
	return status
}

func apiError(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// Interface guards
var (
	_ caddy.Module      = (*adminAPI)(nil)
	_ caddy.AdminRouter = (*adminAPI)(nil)
)
