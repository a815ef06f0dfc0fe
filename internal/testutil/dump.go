package testutil

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"modernc.org/sqlite"
)

// What someone without the keys can read of a store's database, for the
// tests of encryption at rest, which look for a marker in it.

// SQLiteBytes returns the bytes of the SQLite database at path as they
// lie on disk, the file and its WAL, followed by a copy made through
// SQLite's online backup (sqlite3's .backup), taken while the store that
// owns the file may still be running.
func SQLiteBytes(tb testing.TB, path string) []byte {
	tb.Helper()
	var out []byte
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			tb.Fatalf("read %s: %v", p, err)
		}
		out = append(out, b...)
	}
	backup, err := SQLiteBackup(context.Background(), path, filepath.Join(tb.TempDir(), "backup.db"))
	if err != nil {
		tb.Fatalf("back up %s: %v", path, err)
	}
	defer os.Remove(backup)
	b, err := os.ReadFile(backup)
	if err != nil {
		tb.Fatalf("read the backup: %v", err)
	}
	return append(out, b...)
}

// SQLiteBackup copies the database at path to dst with SQLite's online
// backup API, as `sqlite3 <path> ".backup <dst>"` does, and returns dst.
func SQLiteBackup(ctx context.Context, path, dst string) (string, error) {
	os.Remove(dst)
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return "", err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		bc, ok := dc.(interface {
			NewBackup(string) (*sqlite.Backup, error)
		})
		if !ok {
			return fmt.Errorf("driver connection %T cannot back up", dc)
		}
		b, err := bc.NewBackup(dst)
		if err != nil {
			return err
		}
		for {
			more, err := b.Step(-1)
			if err != nil {
				b.Finish()
				return err
			}
			if !more {
				return b.Finish()
			}
		}
	})
	return dst, err
}

// PostgresBytes returns every value of every table of schema as a
// SELECT returns it (bytea as its bytes, not as hex), one after another.
func PostgresBytes(tb testing.TB, dsn, schema string) []byte {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
	if err != nil {
		tb.Fatalf("list tables: %v", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatalf("list tables: %v", err)
	}
	var out []byte
	for _, table := range tables {
		rows, err := conn.Query(ctx, "SELECT * FROM "+pgx.Identifier{schema, table}.Sanitize())
		if err != nil {
			tb.Fatalf("select %s: %v", table, err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				tb.Fatalf("select %s: %v", table, err)
			}
			for _, v := range vals {
				switch v := v.(type) {
				case []byte:
					out = append(out, v...)
				case string:
					out = append(out, v...)
				default:
					out = fmt.Append(out, v)
				}
				out = append(out, '\n')
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			tb.Fatalf("select %s: %v", table, err)
		}
	}
	return out
}
