package postgres

import (
	"context"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// sqlHeld reads the running jobs among the ids of $1, one primary-key
// seek each; the caller keeps those whose fence matches.
const sqlHeld = `SELECT j.id, j.event_id, j.source, e.delivery_id, e.event_type, j.target,
	j.attempts, j.replays, j.replay_base, j.fence, coalesce(j.lease_owner, ''), j.lease_until, j.created_at
FROM jobs AS j JOIN events AS e ON e.id = j.event_id
WHERE j.id = ANY($1::bigint[]) AND j.status = 'running'`

// Held returns the jobs of the claims that still hold their job, without
// headers or payload.
func (s *Store) Held(ctx context.Context, claims []queue.Claimed) ([]*queue.Job, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
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
	var jobs []*queue.Job
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlHeld, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j := new(queue.Job)
			var leaseUntil pgtype.Timestamptz
			if err := rows.Scan(&j.ID, &j.EventID, &j.Source, &j.DeliveryID, &j.EventType, &j.Target,
				&j.Attempt, &j.Replays, &j.ReplayBase, &j.Fence, &j.LeaseOwner, &leaseUntil, &j.CreatedAt); err != nil {
				return err
			}
			if !asked[j.Claimed()] {
				continue // claimed again since: that claim is stale
			}
			j.LeaseUntil = timeOf(leaseUntil)
			jobs = append(jobs, j)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.readFail("read held claims", err)
	}
	return jobs, nil
}
