package signature

// GitLab's webhook signing token (GitLab 18.x, beside the older
// X-Gitlab-Token of the gitlab scheme) signs the Standard Webhooks way:
// webhook-id (the Idempotency-Key), webhook-timestamp and
// webhook-signature: v1,<base64> over "<id>.<timestamp>.<body>", keyed with
// the base64 after the token's "whsec_" prefix
// (https://gitlab.com/gitlab-org/gitlab/-/merge_requests/230944,
// https://gitlab.com/gitlab-org/gitlab/-/merge_requests/231325). The event
// type stays in X-Gitlab-Event.
func init() {
	registerStandard(standardSender{
		name: "gitlabsigned", keys: KeySecrets, mode: SecretBase64,
		typ: []source{header(headerGitLabEvent)}, forward: []string{headerGitLabEvent},
	})
}
