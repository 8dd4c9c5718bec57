# The test command of the README. It installs what the suite needs when it
# is missing (scripts/test-deps.sh: the pinned npm packages of testdata/npm,
# npm ci only when the lock file changed; PostgreSQL 15 server binaries and
# Chromium with apt-get), then vets and tests. The store's PostgreSQL suite
# starts its own throwaway server (initdb + pg_ctl) and fails rather than
# skips without one; so does the dashboard's browser test without Chromium.
.PHONY: test build npm deps bench

test: deps
	go vet ./...
	SWITCHBOARD_REQUIRE_NPM=1 SWITCHBOARD_REQUIRE_POSTGRES=1 SWITCHBOARD_REQUIRE_BROWSER=1 go test -race -timeout 20m ./...

deps:
	./scripts/test-deps.sh

npm:
	cd testdata/npm && npm ci --no-audit --no-fund --loglevel=error

build:
	go build -o switchboard ./cmd/switchboard

bench:
	go run ./bench
