package testwait_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/internal/testwait"
)

// TestReceive returns what was sent.
func TestReceive(t *testing.T) {
	t.Parallel()
	ch := make(chan int, 1)
	ch <- 7
	require.Equal(t, 7, testwait.Receive(t, context.Background(), ch, "seven"))
}
