package server_test

import (
	"os"
	"testing"

	"github.com/lhengine/lhengine/internal/testpg"
)

// TestMain stops the PostgreSQL cluster the tests started, if any.
func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }
