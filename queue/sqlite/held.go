package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/caddywebhook/caddywebhook/queue"
)

// sqlHeld reads the running jobs among the ids of a JSON array (?1), one
// primary-key seek each; the caller keeps those whose fence matches.
const sqlHeld = `SELECT j.id, j.event_id, j.source, e.delivery_id, e.event_type, j.target,
	j.attempts, j.replays, j.replay_base, j.fence, coalesce(j.lease_owner, ''), coalesce(j.lease_until, 0), j.created_at
FROM jobs AS j JOIN events AS e ON e.id = j.event_id
WHERE j.id IN (SELECT value FROM json_each(?1)) AND j.status = 'running'`

// Held returns the jobs of the claims that still hold their job, without
// headers or payload.
func (s *Store) Held(ctx context.Context, claims []queue.Claimed) ([]*queue.Job, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	asked := make(map[queue.Claimed]bool, len(claims))
	ids := make([]int64, 0, len(claims))
	for _, c := range claims {
		if !asked[c] {
			ids = append(ids, c.ID)
		}
		asked[c] = true
	}
	list, _ := json.Marshal(ids) // a slice of int64 always marshals
	var jobs []*queue.Job
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, sqlHeld, string(list))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j := new(queue.Job)
			var leaseUntil, created int64
			if err := rows.Scan(&j.ID, &j.EventID, &j.Source, &j.DeliveryID, &j.EventType, &j.Target,
				&j.Attempt, &j.Replays, &j.ReplayBase, &j.Fence, &j.LeaseOwner, &leaseUntil, &created); err != nil {
				return err
			}
			if !asked[j.Claimed()] {
				continue // claimed again since: that claim is stale
			}
			j.LeaseUntil, j.CreatedAt = fromMS(leaseUntil), fromMS(created)
			jobs = append(jobs, j)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read held claims: %w", err)
	}
	return jobs, nil
}
