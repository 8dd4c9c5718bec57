package store

import (
	"embed"
	"errors"
	"io/fs"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is what differs between database engines. Everything else, the SQL
// of the data methods included, is shared.
type dialect struct {
	name       string
	driver     string // database/sql driver name
	migrations fs.FS  // *.sql files, applied in name order
	// isConflict reports whether err is a uniqueness violation.
	isConflict func(err error) bool
}

//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

func sqliteDialect() *dialect {
	sub, err := fs.Sub(sqliteMigrations, "migrations/sqlite")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return &dialect{
		name:       "sqlite",
		driver:     "sqlite",
		migrations: sub,
		isConflict: func(err error) bool {
			var e *sqlite.Error
			if !errors.As(err, &e) {
				return false
			}
			switch e.Code() {
			case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
				return true
			}
			return false
		},
	}
}

// isBusy reports whether err is SQLite's "database is locked".
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}
