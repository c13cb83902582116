# Lethe. The two commands: `make run` (the demo on embedded components) and `make test`.
SHELL := /bin/bash
# The Go toolchain every go.mod asks for; the go command fetches it through the module proxy.
# $(shell) does not see exported variables in GNU Make 4.3, hence the prefix on MODULES.
export GOTOOLCHAIN := go1.27.3
MODULES := $(shell GOTOOLCHAIN=$(GOTOOLCHAIN) go list -m -f '{{.Dir}}' 2>/dev/null)
DYNALITE := .tools/node_modules/dynalite/cli.js
GOTEST_FLAGS ?= -count=1 -timeout 10m
# The unit and integration tests run under the race detector; the fault-injection and
# benchmark modules do not (they measure recovery times and throughput within deadlines,
# which -race's slowdown would fail).
RACE ?= -race

# The Kafka under test (pkg/testenv): kafka, Apache Kafka from .tools/kafka (each test
# package starts its broker, unless LETHE_TEST_KAFKA_BROKERS names one), or kfake, in process.
LETHE_TEST_BROKER ?= kafka
export LETHE_TEST_BROKER
KAFKA := .tools/kafka/libs/.resolved
KAFKA_CDS := .tools/kafka/kafka.jsa

.PHONY: run serve docs test vet lint chart build-modules vuln tools browser-test fuzz bench bench-storage chaos chaos-short clean

## run: erase one demo customer from all five stores on embedded components; prints the receipt
run:
	go run ./services/standalone -demo

## serve: run every service in one process on embedded components, the demo tenant seeded (intake on 127.0.0.1:8080)
serve:
	go run ./services/standalone -seed

## docs: write docs/configuration.md from the services' declared settings (a test fails when it is stale)
docs:
	cd pkg && go generate ./catalog

## test: vet, build every module on its own, and run every module's tests (needs redis-server, node and python3);
## the fault-injection module last and verbose, so its figures print
## (Apache Kafka: a broker per test package, as packages run in parallel and one shared broker would
## serialise them; a broker started first prints its version and fails the run early if none can start)
test: tools vet build-modules
	@if [ "$$LETHE_TEST_BROKER" = kafka ] && [ -z "$$LETHE_TEST_KAFKA_BROKERS" ]; then cd pkg && go run ./testenv/cmd/kafkabroker -- true; fi
	@set -e; for m in $(filter-out $(CURDIR)/chaos,$(MODULES)); do echo "== go test $${m#$(CURDIR)/}"; race="$(RACE)"; case $$m in */bench) race=;; esac; (cd $$m && go test $(GOTEST_FLAGS) $$race ./...); done
	@echo "== go test chaos"; $(MAKE) --no-print-directory chaos-short

vet:
	@set -e; for m in $(MODULES); do (cd $$m && go vet ./...); done
	@test -z "$$(gofmt -l $(MODULES))" || { echo "gofmt needed:"; gofmt -l $(MODULES); exit 1; }

## lint: golangci-lint over every module (.golangci.yml; .ci/run installs the pinned version)
lint:
	@set -e; for m in $(MODULES); do echo "== golangci-lint $${m#$(CURDIR)/}"; (cd $$m && golangci-lint run ./...); done

## chart: helm lint (strict) and helm template of deploy/helm/lethe with its example values
## (the deploy module's tests also run the rendered chart; .ci/run installs the pinned helm)
chart:
	helm lint --strict deploy/helm/lethe -f deploy/helm/lethe/ci/example-values.yaml
	helm template lethe deploy/helm/lethe --namespace lethe -f deploy/helm/lethe/ci/example-values.yaml >/dev/null

## build-modules: build each module with GOWORK=off, proving every go.mod is complete
build-modules:
	@set -e; for m in $(MODULES); do (cd $$m && GOWORK=off go build -o /dev/null ./... ); done

## vuln: govulncheck over every module against a database built from the golang.org/x/vulndb module (cached in .tools/vulndb); fails on anything reachable
vuln:
	.ci/vulncheck

## tools: install into .tools moto's server (S3 and DynamoDB for tests), the Python client's test requirements and Qdrant Edge (the Qdrant emulator's oracle) (one Python virtual environment, pinned),
## Apache Kafka's jars (tools/kafka/pom.xml, with Maven; the test broker, started once to archive its classes),
## dynalite (table-name validation, LETHE_TEST_STANDINS=1), playwright-core (the console's browser test, with Debian's chromium)
## and the RAG app's libraries (examples/rag-app, pinned; a virtual environment of its own, .tools/rag-venv)
PLAYWRIGHT := .tools/node_modules/playwright-core/package.json
MOTO := .tools/venv/bin/moto_server
MOTO_REQUIREMENTS := pkg/testenv/moto-requirements.txt
PYCLIENT_REQUIREMENTS := clients/python/requirements-test.txt
EDGE_REQUIREMENTS := pkg/qdrantfake/edgediff/requirements.txt
RAGAPP := .tools/rag-venv/.installed
RAGAPP_REQUIREMENTS := examples/rag-app/requirements.txt
tools: $(MOTO) $(RAGAPP) $(KAFKA) $(KAFKA_CDS) $(DYNALITE) $(PLAYWRIGHT)
$(MOTO): $(MOTO_REQUIREMENTS) $(PYCLIENT_REQUIREMENTS) $(EDGE_REQUIREMENTS)
	rm -rf .tools/venv
	python3 -m venv .tools/venv
	.tools/venv/bin/pip install --quiet --disable-pip-version-check --only-binary=:all: -r $(MOTO_REQUIREMENTS) -r $(PYCLIENT_REQUIREMENTS) -r $(EDGE_REQUIREMENTS)
	touch $@
$(RAGAPP): $(RAGAPP_REQUIREMENTS)
	rm -rf .tools/rag-venv
	python3 -m venv .tools/rag-venv
	.tools/rag-venv/bin/pip install --quiet --disable-pip-version-check --only-binary=:all: -r $(RAGAPP_REQUIREMENTS)
	touch $@
$(KAFKA): tools/kafka/pom.xml tools/kafka/log4j2.properties
	rm -rf .tools/kafka && mkdir -p .tools/kafka
	mvn -q -B -f tools/kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/.tools/kafka/libs
	cp tools/kafka/log4j2.properties .tools/kafka/
	touch $@
$(KAFKA_CDS): $(KAFKA)
	cd pkg && go run ./testenv/cmd/kafkabroker -archive ../$@
$(DYNALITE):
	npm install --prefix .tools --no-audit --no-fund --silent dynalite@4.0.0
$(PLAYWRIGHT):
	npm install --prefix .tools --no-audit --no-fund --silent playwright-core@1.65

## browser-test: the console driven in /usr/bin/chromium (screenshots in .tools/screenshots)
browser-test: $(PLAYWRIGHT)
	cd pkg && go test $(GOTEST_FLAGS) -run TestConsoleInBrowser -v ./console

## fuzz: run each fuzz target for FUZZTIME executions (a count: a duration trips a race in Go 1.26's fuzz coordinator, go.dev/issue/75804)
## (FuzzSubmit's intake publishes to kfake: a real broker per fuzzing worker process would cost a JVM each)
FUZZTIME ?= 50000x
fuzz: LETHE_TEST_BROKER = kfake
fuzz:
	@set -e; cd pkg; for p in $$(grep -rl '^func Fuzz' --include='*_test.go' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -h '^func Fuzz' $$p/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "== $$p $$f"; go test $$p -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME); done; done

clean:
	rm -rf .tools .bench

# COST_BASELINE is the revision whose services make bench's cost table measures beside this tree's:
# the services before the cost work, with the backend call counter already in.
COST_BASELINE ?= 358ebb4

## bench: measure erasure cost against corpus size, the seeds' approach beside it, end-to-end latency, throughput and memory; writes .bench/results.json;
## then each service's CPU, allocations and backend calls per erasure on the separate-process topology, at a low rate and for a backlog, beside
## COST_BASELINE's services (cost/... in .bench/results.json); then throughput with 1, 2 and 4 instances of every deleter under injected store latency and CPU per erasure per service, without and
## with a CPU limit of 50m per deleter instance (a cgroup quota, as a pod's limit), batched and not (480 erasures a phase there, so that the partitions' hash shares of the requests even out); writes .bench/scaling.json and .bench/scaling-cpu-limited.json
bench: tools
	cd bench && go run ./cmd/benchrun -out ../.bench/results.json
	cd chaos && go run ./cmd/cost -baseline $(COST_BASELINE) -out ../.bench/results.json
	cd chaos && go run ./cmd/scaling -s3 gofakes3 -out ../.bench/scaling.json
	cd chaos && go run ./cmd/scaling -s3 gofakes3 -n 480 -batch-max ',1' -instance-cpu 50m -out ../.bench/scaling-cpu-limited.json

## bench-storage: the embedded audit and workflow stores on the write-ahead log, bbolt and a JSON file, side by side (docs/storage.md)
bench-storage:
	mkdir -p .bench
	set -o pipefail; cd bench && go test -run '^$$' -bench . -count 5 -timeout 30m ./storagecmp | tee ../.bench/storage.txt
	cd bench && go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da -col /store ../.bench/storage.txt
	bench/storagecmp/fsyncs.sh

## chaos-short: the fault-injection tests (N=200 with kills, outages, scaling, broker restarts)
chaos-short: tools
	cd chaos && go test $(GOTEST_FLAGS) -v ./...

## chaos: the long fault-injection run (5000 requests, services and the broker killed at random)
chaos: tools
	cd chaos && go run ./cmd/chaos -n 5000
