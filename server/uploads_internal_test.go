package server

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lhengine/lhengine/api"
)

// FuzzSubmitDecoding: whatever body a client sends to POST /v1/tasks over
// TCP, decoding it and reading the bundle it names never panics, and a
// refusal is a bad request that says why; an accepted bundle has an
// absolute task file among its files, and no path.
func FuzzSubmitDecoding(f *testing.F) {
	sum := strings.Repeat("ab", 32)
	for _, seed := range []string{
		`{"bundle": {"task": "/c/t.hcl", "files": {"/c/t.hcl": {"sha256": "` + sum + `", "size": 3}}}}`,
		`{"bundle": {"task": "/c/t.hcl", "home": "/h", "files": {"/c/t.hcl": {"sha256": "` + sum + `", "size": 3}, "/c/p/a.hcl": {"sha256": "` + sum + `", "size": 3}}, "dirs": ["/c/p"]}, "policy_dirs": ["/c/p"], "model_replay": "/c/r"}`,
		`{"bundle": {"task": "/c/../etc/passwd", "files": {"/c/../etc/passwd": {"sha256": "` + sum + `", "size": 3}}}}`,
		`{"bundle": {"task": "t.hcl", "files": {}}}`,
		`{"bundle": {"task": "/t.hcl", "files": {"/t.hcl": {"sha256": "XYZ", "size": -1}}}}`,
		`{"bundle": {"task": "/t.hcl", "files": {"/t.hcl": {"sha256": "` + sum + `", "size": 99999999999999}}}}`,
		`{"bundle": {"task": "/t.hcl", "files": null, "dirs": [""]}}`,
		`{"path": "/etc/passwd"}`,
		`{"path": "/t.hcl", "bundle": {}}`,
		`{"bundle": null}`,
		`{}`, `[]`, `null`, `{"bundle": {"files": {"": {}}}}`, `{"unknown": 1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/v1/tasks", strings.NewReader(string(body)))
		var in api.SubmitRequest
		if err := readJSON(req, &in); err != nil {
			require.True(t, errors.Is(err, errBadRequest), "%v", err)
			return
		}
		sub, err := submissionOf(&in, true)
		if err != nil {
			require.True(t, errors.Is(err, errBadRequest), "%v", err)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotNil(t, sub.bundle, "over TCP only a bundle is accepted")
		require.Empty(t, sub.path)
		require.True(t, strings.HasPrefix(sub.bundle.Task, "/"))
		_, ok := sub.bundle.Files[sub.bundle.Task]
		require.True(t, ok)
		require.NoError(t, sub.bundle.Check())
	})
}
