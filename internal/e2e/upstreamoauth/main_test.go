package upstreamoauth

import (
	"os"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/store/storetest"
)

// TestMain shares one throwaway PostgreSQL server among the tests that
// need one, and stops it at the end.
func TestMain(m *testing.M) {
	os.Exit(storetest.PostgresMain(m))
}
