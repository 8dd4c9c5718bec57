package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// REST does one request of the gateway's REST API at baseURL as key ("" for
// none), with body (nil for none) as JSON, and decodes the answer as a JSON
// object (nil when it is not one). Only transport errors are errors: a
// replica under test may have been stopped on purpose.
func REST(ctx context.Context, baseURL, key, method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, baseURL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, nil
}
