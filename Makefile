# The test command of the README. It installs the pinned npm MCP servers the
# integration tests start as upstreams (testdata/npm), then vets and tests.
# The store's PostgreSQL suite starts its own throwaway server (initdb +
# pg_ctl, PostgreSQL 15 binaries) and fails rather than skips without one;
# so does the dashboard's browser test without /usr/bin/chromium.
.PHONY: test build npm bench

test: npm
	go vet ./...
	SWITCHBOARD_REQUIRE_NPM=1 SWITCHBOARD_REQUIRE_POSTGRES=1 SWITCHBOARD_REQUIRE_BROWSER=1 go test -race -timeout 20m ./...

npm:
	cd testdata/npm && npm ci --no-audit --no-fund --loglevel=error

build:
	go build -o switchboard ./cmd/switchboard

bench:
	go run ./bench
