package search

import (
	"fmt"
	"strings"
	"unicode"
)

// The synthetic corpus: about 65 servers across the domains a gateway meets
// (code hosting, trackers, chat, mail, databases, storage, cloud, browsers,
// search engines, monitoring, ...), generated deterministically. Each server
// has CRUD-style tools for its resources (so "list", "get", "create",
// "search" overlap across servers, as in real catalogs) plus hand-written
// tools specific to the product. Naming styles vary per server.

type resource struct {
	singular, plural string
	f1, f2           string // two notable fields, used in descriptions and params
}

type extra struct {
	name, desc string
	params     []string // "name: description"
}

type domain struct {
	server, product, desc, container string
	style                            string // "snake" (default), "camel", "kebab"
	resources                        []resource
	extras                           []extra
}

func r(singular, plural, f1, f2 string) resource { return resource{singular, plural, f1, f2} }

func x(name, desc string, params ...string) extra { return extra{name, desc, params} }

var domains = []domain{
	{server: "github", product: "GitHub", desc: "GitHub repositories, issues, pull requests and code", container: "a repository",
		resources: []resource{r("issue", "issues", "title", "labels"), r("pull request", "pull requests", "head branch", "reviewers"), r("branch", "branches", "name", "protection rules")},
		extras: []extra{
			x("merge_pull_request", "Merge a pull request into its base branch using merge, squash or rebase.", "pull_number: number of the pull request", "merge_method: merge, squash or rebase"),
			x("get_file_contents", "Get the contents of a file or directory from a GitHub repository at a given ref.", "path: file path", "ref: branch, tag or commit SHA"),
			x("create_or_update_file", "Create or update a single file in a GitHub repository with a commit.", "path: file path", "content: new file content", "message: commit message"),
			x("fork_repository", "Fork a GitHub repository to your account or an organization.", "owner: repository owner", "repo: repository name"),
			x("list_commits", "List commits of a branch in a GitHub repository.", "sha: branch name or commit SHA"),
		}},
	{server: "gitlab", product: "GitLab", desc: "GitLab projects, merge requests and CI/CD pipelines", container: "a project",
		resources: []resource{r("issue", "issues", "title", "milestone"), r("merge request", "merge requests", "source branch", "target branch"), r("pipeline", "pipelines", "status", "ref")},
		extras: []extra{
			x("retry_pipeline", "Retry the failed jobs of a GitLab CI/CD pipeline.", "pipeline_id: pipeline ID"),
			x("get_job_log", "Get the log output (trace) of a GitLab CI job.", "job_id: job ID"),
			x("approve_merge_request", "Approve a GitLab merge request.", "merge_request_iid: merge request IID"),
		}},
	{server: "bitbucket", product: "Bitbucket", desc: "Bitbucket Cloud repositories and pull requests", container: "a workspace",
		resources: []resource{r("pull request", "pull requests", "source branch", "reviewers"), r("repository", "repositories", "name", "visibility"), r("commit", "commits", "hash", "author")}},
	{server: "jira", product: "Jira", desc: "Atlassian Jira issue and project tracking", container: "a project",
		resources: []resource{r("issue", "issues", "summary", "assignee"), r("sprint", "sprints", "goal", "dates"), r("project", "projects", "key", "lead")},
		extras: []extra{
			x("transition_issue", "Transition a Jira issue to another workflow status, such as In Progress or Done.", "issue_key: issue key like PROJ-123", "transition: target status"),
			x("add_comment", "Add a comment to a Jira issue.", "issue_key: issue key", "body: comment text"),
			x("log_work", "Log time spent working on a Jira issue.", "issue_key: issue key", "time_spent: like 2h 30m"),
			x("search_jql", "Search Jira issues with a JQL query.", "jql: JQL query string"),
		}},
	{server: "linear", product: "Linear", desc: "Linear issue tracking for software teams", container: "a team", style: "camel",
		resources: []resource{r("issue", "issues", "title", "priority"), r("team", "teams", "name", "members"), r("cycle", "cycles", "start date", "end date")},
		extras:    []extra{x("assign_issue", "Assign a Linear issue to a user.", "issue_id: issue ID", "assignee_id: user ID")}},
	{server: "asana", product: "Asana", desc: "Asana work management", container: "a workspace",
		resources: []resource{r("task", "tasks", "name", "due date"), r("project", "projects", "name", "owner"), r("section", "sections", "name", "order")},
		extras:    []extra{x("complete_task", "Mark an Asana task as complete.", "task_gid: task ID")}},
	{server: "trello", product: "Trello", desc: "Trello boards, lists and cards", container: "a board",
		resources: []resource{r("card", "cards", "name", "due date"), r("board", "boards", "name", "background"), r("checklist", "checklists", "name", "items")},
		extras:    []extra{x("move_card", "Move a Trello card to another list or board.", "card_id: card ID", "list_id: destination list ID")}},
	{server: "notion", product: "Notion", desc: "Notion pages, databases and blocks", container: "a workspace",
		resources: []resource{r("page", "pages", "title", "properties"), r("database", "databases", "title", "schema"), r("block", "blocks", "type", "content")},
		extras:    []extra{x("query_database", "Query a Notion database with filters and sorts.", "database_id: database ID", "filter: filter object")}},
	{server: "confluence", product: "Confluence", desc: "Atlassian Confluence wiki", container: "a space",
		resources: []resource{r("page", "pages", "title", "body"), r("space", "spaces", "key", "name"), r("attachment", "attachments", "file name", "media type")},
		extras:    []extra{x("search_cql", "Search Confluence content with a CQL query.", "cql: CQL query")}},
	{server: "gdocs", product: "Google Docs", desc: "Google Docs documents", container: "Google Drive",
		resources: []resource{r("document", "documents", "title", "body"), r("comment", "comments", "content", "anchor"), r("revision", "revisions", "author", "modified time")},
		extras:    []extra{x("export_document_pdf", "Export a Google Docs document as PDF.", "document_id: document ID")}},
	{server: "slack", product: "Slack", desc: "Slack workspace messaging", container: "a workspace",
		resources: []resource{r("channel", "channels", "name", "topic"), r("user", "users", "display name", "email"), r("reminder", "reminders", "text", "time")},
		extras: []extra{
			x("send_message", "Post a message to a Slack channel or thread.", "channel: channel ID or name", "text: message text", "thread_ts: thread timestamp to reply in"),
			x("add_reaction", "Add an emoji reaction to a Slack message.", "channel: channel ID", "timestamp: message timestamp", "name: emoji name"),
			x("upload_file", "Upload a file to Slack and share it in channels.", "channels: channel IDs", "file: file content"),
			x("get_channel_history", "Get recent messages posted in a Slack channel.", "channel: channel ID", "limit: number of messages"),
		}},
	{server: "discord", product: "Discord", desc: "Discord servers (guilds) and channels", container: "a guild",
		resources: []resource{r("channel", "channels", "name", "type"), r("member", "members", "nickname", "roles"), r("role", "roles", "name", "permissions")},
		extras:    []extra{x("send_message", "Send a message to a Discord channel.", "channel_id: channel ID", "content: message content")}},
	{server: "teams", product: "Microsoft Teams", desc: "Microsoft Teams chats, channels and meetings", container: "a team",
		resources: []resource{r("chat", "chats", "topic", "members"), r("team", "teams", "display name", "description"), r("meeting", "meetings", "subject", "start time")},
		extras:    []extra{x("post_message", "Post a message to a Microsoft Teams channel or chat.", "chat_id: chat or channel ID", "body: message body")}},
	{server: "gmail", product: "Gmail", desc: "Gmail email", container: "the mailbox",
		resources: []resource{r("email", "emails", "subject", "sender"), r("label", "labels", "name", "color"), r("draft", "drafts", "subject", "recipients")},
		extras: []extra{
			x("send_email", "Send an email from Gmail to one or more recipients.", "to: recipient addresses", "subject: subject line", "body: message body"),
			x("reply_to_email", "Reply to an email thread in Gmail.", "message_id: message to reply to", "body: reply text"),
		}},
	{server: "outlook", product: "Outlook", desc: "Microsoft Outlook mail and contacts", container: "the mailbox", style: "camel",
		resources: []resource{r("message", "messages", "subject", "from"), r("folder", "folders", "display name", "unread count"), r("contact", "contacts", "name", "email address")},
		extras:    []extra{x("send_mail", "Send a mail message with Outlook.", "to: recipients", "subject: subject", "body: body")}},
	{server: "calendar", product: "Google Calendar", desc: "Google Calendar events and scheduling", container: "a calendar",
		resources: []resource{r("event", "events", "start time", "attendees"), r("calendar", "calendars", "summary", "time zone"), r("attendee", "attendees", "email", "response status")},
		extras: []extra{
			x("find_free_slots", "Find free time slots when all attendees are available.", "attendees: emails", "duration_minutes: meeting length"),
			x("respond_to_invitation", "Accept, decline or tentatively accept an event invitation.", "event_id: event ID", "response: accepted, declined or tentative"),
		}},
	{server: "zoom", product: "Zoom", desc: "Zoom video meetings and webinars", container: "your account",
		resources: []resource{r("meeting", "meetings", "topic", "start time"), r("recording", "recordings", "meeting ID", "file type"), r("webinar", "webinars", "topic", "panelists")}},
	{server: "postgres", product: "PostgreSQL", desc: "PostgreSQL database", container: "the database",
		resources: []resource{r("table", "tables", "columns", "schema"), r("schema", "schemas", "name", "owner"), r("index", "indexes", "columns", "method")},
		extras: []extra{
			x("query", "Run a read-only SQL query against the PostgreSQL database and return the rows.", "sql: SQL statement"),
			x("execute_sql", "Execute a SQL statement that modifies data (INSERT, UPDATE, DELETE, DDL) in PostgreSQL.", "sql: SQL statement"),
			x("explain_query", "Show the execution plan of a SQL query with EXPLAIN ANALYZE.", "sql: SQL statement"),
		}},
	{server: "mysql", product: "MySQL", desc: "MySQL database server", container: "the server",
		resources: []resource{r("table", "tables", "columns", "engine"), r("database", "databases", "name", "charset"), r("user", "users", "host", "grants")},
		extras:    []extra{x("run_query", "Run a SQL query on MySQL and return the result set.", "query: SQL query")}},
	{server: "sqlite", product: "SQLite", desc: "SQLite database file", container: "the database file",
		resources: []resource{r("table", "tables", "columns", "rows")},
		extras: []extra{
			x("read_query", "Execute a SELECT query on the SQLite database.", "query: SELECT statement"),
			x("write_query", "Execute an INSERT, UPDATE or DELETE query on the SQLite database.", "query: SQL statement"),
			x("describe_table", "Get the schema (columns and types) of a SQLite table.", "table_name: table"),
		}},
	{server: "mongodb", product: "MongoDB", desc: "MongoDB document database", container: "a database",
		resources: []resource{r("collection", "collections", "name", "validator"), r("document", "documents", "filter", "projection"), r("index", "indexes", "keys", "options")},
		extras: []extra{
			x("aggregate", "Run an aggregation pipeline on a MongoDB collection.", "collection: collection name", "pipeline: aggregation stages"),
			x("find", "Find documents in a MongoDB collection matching a filter.", "collection: collection name", "filter: query filter"),
		}},
	{server: "redis", product: "Redis", desc: "Redis key-value store", container: "the Redis instance",
		resources: []resource{r("key", "keys", "pattern", "ttl"), r("stream", "streams", "entries", "consumer group")},
		extras: []extra{
			x("get_value", "Get the value stored at a Redis key.", "key: key name"),
			x("set_value", "Set a Redis key to a value with an optional expiry.", "key: key name", "value: value", "ttl_seconds: expiry"),
			x("publish", "Publish a message on a Redis pub/sub channel.", "channel: channel", "message: message"),
		}},
	{server: "elasticsearch", product: "Elasticsearch", desc: "Elasticsearch search and analytics engine", container: "the cluster",
		resources: []resource{r("index", "indices", "mappings", "settings"), r("alias", "aliases", "index", "filter")},
		extras: []extra{
			x("search_documents", "Search documents in an Elasticsearch index with the query DSL.", "index: index name", "query: query DSL"),
			x("cluster_health", "Get the health status of the Elasticsearch cluster.")}},
	{server: "bigquery", product: "BigQuery", desc: "Google BigQuery data warehouse", container: "a project",
		resources: []resource{r("dataset", "datasets", "location", "labels"), r("table", "tables", "schema", "partitioning"), r("job", "jobs", "state", "statistics")},
		extras:    []extra{x("run_query", "Run a SQL query in BigQuery and return the results.", "query: standard SQL")}},
	{server: "snowflake", product: "Snowflake", desc: "Snowflake data cloud", container: "an account",
		resources: []resource{r("warehouse", "warehouses", "size", "auto suspend"), r("table", "tables", "columns", "clustering key"), r("stage", "stages", "url", "file format")},
		extras:    []extra{x("execute_query", "Execute a SQL query in Snowflake.", "statement: SQL")}},
	{server: "s3", product: "Amazon S3", desc: "Amazon S3 object storage", container: "your AWS account",
		resources: []resource{r("bucket", "buckets", "region", "versioning"), r("object", "objects", "key", "size")},
		extras: []extra{
			x("upload_object", "Upload a file as an object to an S3 bucket.", "bucket: bucket name", "key: object key", "body: content"),
			x("download_object", "Download an object from an S3 bucket.", "bucket: bucket name", "key: object key"),
			x("presign_url", "Generate a presigned URL for temporary access to an S3 object.", "bucket: bucket", "key: key", "expires_in: seconds"),
		}},
	{server: "gcs", product: "Google Cloud Storage", desc: "Google Cloud Storage buckets and objects", container: "a project",
		resources: []resource{r("bucket", "buckets", "location", "storage class"), r("object", "objects", "name", "content type")},
		extras:    []extra{x("upload_object", "Upload a file to a Cloud Storage bucket.", "bucket: bucket", "name: object name", "data: content")}},
	{server: "azure_blob", product: "Azure Blob Storage", desc: "Azure Blob Storage", container: "a storage account",
		resources: []resource{r("container", "containers", "name", "access level"), r("blob", "blobs", "name", "tier")}},
	{server: "gdrive", product: "Google Drive", desc: "Google Drive files and folders", container: "Drive",
		resources: []resource{r("file", "files", "name", "mime type"), r("folder", "folders", "name", "parent"), r("permission", "permissions", "role", "email")},
		extras:    []extra{x("share_file", "Share a Google Drive file with a user or group.", "file_id: file", "email: email", "role: reader, commenter or writer")}},
	{server: "dropbox", product: "Dropbox", desc: "Dropbox cloud files", container: "your Dropbox",
		resources: []resource{r("file", "files", "path", "size"), r("folder", "folders", "path", "sharing"), r("shared link", "shared links", "url", "expiry")}},
	{server: "kubernetes", product: "Kubernetes", desc: "Kubernetes cluster management", container: "a namespace", style: "kebab",
		resources: []resource{r("pod", "pods", "status", "labels"), r("deployment", "deployments", "replicas", "image"), r("service", "services", "ports", "selector")},
		extras: []extra{
			x("get_pod_logs", "Get the logs of a container in a Kubernetes pod.", "name: pod name", "container: container name", "tail_lines: lines"),
			x("scale_deployment", "Scale a Kubernetes deployment to a number of replicas.", "name: deployment", "replicas: count"),
			x("exec_in_pod", "Execute a command inside a container of a running pod.", "name: pod", "command: command and args"),
			x("apply_manifest", "Apply a YAML manifest to the cluster, like kubectl apply.", "manifest: YAML"),
		}},
	{server: "docker", product: "Docker", desc: "Docker engine containers and images", container: "the Docker host",
		resources: []resource{r("container", "containers", "image", "status"), r("image", "images", "tag", "size"), r("volume", "volumes", "driver", "mountpoint")},
		extras: []extra{
			x("container_logs", "Fetch the logs of a Docker container.", "container_id: container", "tail: lines"),
			x("run_container", "Run a new Docker container from an image.", "image: image", "command: command", "ports: port mappings"),
			x("build_image", "Build a Docker image from a Dockerfile.", "context_path: build context", "tag: tag"),
		}},
	{server: "aws", product: "AWS", desc: "Amazon Web Services EC2, Lambda and CloudFormation", container: "a region",
		resources: []resource{r("instance", "instances", "instance type", "state"), r("lambda function", "lambda functions", "runtime", "memory size"), r("stack", "stacks", "template", "parameters")},
		extras: []extra{
			x("invoke_lambda", "Invoke an AWS Lambda function with a JSON payload.", "function_name: function", "payload: JSON"),
			x("start_instance", "Start a stopped EC2 instance.", "instance_id: instance"),
			x("stop_instance", "Stop a running EC2 instance.", "instance_id: instance"),
		}},
	{server: "gcp", product: "Google Cloud", desc: "Google Cloud Platform compute", container: "a project",
		resources: []resource{r("compute instance", "compute instances", "machine type", "zone"), r("cloud function", "cloud functions", "runtime", "trigger"), r("cloud run service", "cloud run services", "image", "region")}},
	{server: "azure", product: "Azure", desc: "Microsoft Azure resources", container: "a subscription", style: "camel",
		resources: []resource{r("virtual machine", "virtual machines", "size", "power state"), r("resource group", "resource groups", "location", "tags"), r("app service", "app services", "plan", "runtime")}},
	{server: "terraform", product: "Terraform Cloud", desc: "Terraform Cloud workspaces and runs", container: "an organization",
		resources: []resource{r("workspace", "workspaces", "name", "terraform version"), r("variable", "variables", "key", "sensitive")},
		extras: []extra{
			x("plan", "Create a Terraform plan for a workspace showing proposed infrastructure changes.", "workspace: workspace"),
			x("apply", "Apply a Terraform plan to provision infrastructure.", "run_id: run"),
		}},
	{server: "cloudflare", product: "Cloudflare", desc: "Cloudflare DNS, CDN and Workers", container: "a zone",
		resources: []resource{r("dns record", "dns records", "type", "content"), r("zone", "zones", "name", "plan"), r("worker", "workers", "script", "routes")},
		extras:    []extra{x("purge_cache", "Purge cached content from Cloudflare's CDN for a zone.", "zone_id: zone", "files: URLs to purge")}},
	{server: "vercel", product: "Vercel", desc: "Vercel deployments", container: "a team",
		resources: []resource{r("deployment", "deployments", "url", "state"), r("project", "projects", "framework", "git repository"), r("domain", "domains", "name", "verification")}},
	{server: "browser", product: "the browser", desc: "Headless browser automation with Playwright", container: "the current page",
		resources: []resource{r("tab", "tabs", "url", "title"), r("cookie", "cookies", "name", "domain")},
		extras: []extra{
			x("navigate", "Navigate the browser to a URL.", "url: URL to open"),
			x("click", "Click an element on the page identified by a CSS selector.", "selector: CSS selector"),
			x("fill_form", "Fill input fields of a form on the page.", "fields: selector and value pairs"),
			x("screenshot", "Take a screenshot of the current page or an element.", "full_page: capture the whole page", "selector: element"),
			x("evaluate_javascript", "Evaluate JavaScript in the page and return the result.", "script: JavaScript code"),
			x("get_page_text", "Get the visible text content of the current page.", ""),
			x("go_back", "Go back to the previous page in history."),
			x("wait_for_selector", "Wait until an element matching a selector appears.", "selector: CSS selector", "timeout_ms: timeout"),
		}},
	{server: "brave_search", product: "Brave Search", desc: "Brave web search API", container: "the web",
		extras: []extra{
			x("web_search", "Search the web with Brave Search and return result titles, URLs and snippets.", "query: search query", "count: results"),
			x("news_search", "Search recent news articles with Brave Search.", "query: search query"),
			x("image_search", "Search for images with Brave Search.", "query: search query"),
			x("local_search", "Search for local businesses and places near a location.", "query: search query", "location: place"),
		}},
	{server: "google_search", product: "Google", desc: "Google search results via SerpAPI", container: "the web",
		extras: []extra{
			x("google_search", "Run a Google search and return organic results.", "q: query", "num: results"),
			x("google_scholar", "Search academic papers on Google Scholar.", "q: query"),
		}},
	{server: "tavily", product: "Tavily", desc: "Tavily search for AI agents", container: "the web",
		extras: []extra{
			x("search", "Search the web for up-to-date information and get an AI-ready answer with sources.", "query: query", "max_results: results"),
			x("extract", "Extract the clean content of web pages from a list of URLs.", "urls: URLs"),
		}},
	{server: "exa", product: "Exa", desc: "Exa neural web search", container: "the web",
		extras: []extra{
			x("search", "Neural search over the web for pages matching a query.", "query: query"),
			x("find_similar", "Find web pages similar to a given URL.", "url: URL"),
			x("get_contents", "Get the full text contents of search results.", "ids: result IDs"),
		}},
	{server: "wikipedia", product: "Wikipedia", desc: "Wikipedia encyclopedia", container: "Wikipedia",
		extras: []extra{
			x("search_articles", "Search Wikipedia articles by keyword.", "query: query"),
			x("get_article", "Get the full content of a Wikipedia article.", "title: article title"),
			x("get_summary", "Get a short summary of a Wikipedia article.", "title: article title"),
		}},
	{server: "fetch", product: "the web", desc: "Fetch web content", container: "the web",
		extras: []extra{x("fetch_url", "Fetch a URL from the internet and convert the HTML content to markdown.", "url: URL", "max_length: characters")}},
	{server: "datadog", product: "Datadog", desc: "Datadog monitoring and observability", container: "your organization",
		resources: []resource{r("monitor", "monitors", "query", "thresholds"), r("dashboard", "dashboards", "title", "widgets"), r("incident", "incidents", "severity", "commander")},
		extras: []extra{
			x("query_metrics", "Query Datadog metrics time series over a time range.", "query: metrics query", "from: start", "to: end"),
			x("search_logs", "Search Datadog logs with a query.", "query: log query", "from: start"),
		}},
	{server: "prometheus", product: "Prometheus", desc: "Prometheus metrics and alerting", container: "the Prometheus server",
		resources: []resource{r("target", "targets", "job", "health"), r("rule", "rules", "expression", "group")},
		extras: []extra{
			x("query", "Evaluate a PromQL instant query.", "query: PromQL expression", "time: evaluation time"),
			x("query_range", "Evaluate a PromQL query over a time range.", "query: PromQL", "start: start", "end: end", "step: resolution"),
			x("list_alerts", "List active Prometheus alerts.", ""),
		}},
	{server: "grafana", product: "Grafana", desc: "Grafana dashboards and alerting", container: "an organization",
		resources: []resource{r("dashboard", "dashboards", "title", "panels"), r("datasource", "datasources", "type", "url"), r("alert rule", "alert rules", "condition", "labels")}},
	{server: "sentry", product: "Sentry", desc: "Sentry error tracking", container: "an organization",
		resources: []resource{r("issue", "issues", "culprit", "level"), r("event", "events", "stack trace", "tags"), r("project", "projects", "platform", "slug")},
		extras:    []extra{x("resolve_issue", "Mark a Sentry issue as resolved.", "issue_id: issue")}},
	{server: "pagerduty", product: "PagerDuty", desc: "PagerDuty incident response", container: "your account",
		resources: []resource{r("incident", "incidents", "urgency", "status"), r("service", "services", "escalation policy", "status"), r("schedule", "schedules", "time zone", "layers")},
		extras: []extra{
			x("acknowledge_incident", "Acknowledge a triggered PagerDuty incident.", "incident_id: incident"),
			x("who_is_on_call", "Show who is currently on call for a schedule or escalation policy.", "schedule_id: schedule"),
		}},
	{server: "stripe", product: "Stripe", desc: "Stripe payments", container: "your Stripe account",
		resources: []resource{r("customer", "customers", "email", "metadata"), r("invoice", "invoices", "amount due", "status"), r("payment intent", "payment intents", "amount", "currency")},
		extras:    []extra{x("refund_payment", "Refund a Stripe charge or payment intent, fully or partially.", "payment_intent: payment", "amount: amount to refund")}},
	{server: "shopify", product: "Shopify", desc: "Shopify store", container: "the store",
		resources: []resource{r("product", "products", "title", "variants"), r("order", "orders", "financial status", "line items"), r("customer", "customers", "email", "addresses")}},
	{server: "hubspot", product: "HubSpot", desc: "HubSpot CRM", container: "the CRM",
		resources: []resource{r("contact", "contacts", "email", "lifecycle stage"), r("deal", "deals", "amount", "stage"), r("company", "companies", "domain", "industry")}},
	{server: "salesforce", product: "Salesforce", desc: "Salesforce CRM", container: "the org", style: "camel",
		resources: []resource{r("account", "accounts", "name", "industry"), r("opportunity", "opportunities", "stage", "amount"), r("lead", "leads", "company", "status")},
		extras:    []extra{x("soql_query", "Run a SOQL query against Salesforce.", "query: SOQL")}},
	{server: "zendesk", product: "Zendesk", desc: "Zendesk customer support", container: "the help desk",
		resources: []resource{r("ticket", "tickets", "subject", "priority"), r("user", "users", "name", "role"), r("macro", "macros", "title", "actions")}},
	{server: "intercom", product: "Intercom", desc: "Intercom customer messaging", container: "the workspace",
		resources: []resource{r("conversation", "conversations", "state", "assignee"), r("contact", "contacts", "email", "tags"), r("article", "articles", "title", "body")}},
	{server: "figma", product: "Figma", desc: "Figma design files", container: "a team",
		resources: []resource{r("file", "files", "name", "last modified"), r("component", "components", "name", "description"), r("comment", "comments", "message", "position")},
		extras:    []extra{x("export_frame", "Export a Figma frame or node as PNG, SVG or PDF.", "file_key: file", "node_id: node", "format: png, svg or pdf")}},
	{server: "spotify", product: "Spotify", desc: "Spotify music playback", container: "your library",
		resources: []resource{r("playlist", "playlists", "name", "tracks"), r("track", "tracks", "artist", "album")},
		extras:    []extra{x("play", "Start or resume playback on the active device.", "uri: track or playlist URI"), x("pause", "Pause playback.")}},
	{server: "weather", product: "the weather service", desc: "Weather forecasts", container: "a location",
		extras: []extra{
			x("get_forecast", "Get the weather forecast for a location for the next days.", "latitude: latitude", "longitude: longitude", "days: days"),
			x("get_current_weather", "Get the current weather conditions (temperature, wind, humidity) for a city.", "city: city"),
			x("get_alerts", "Get active severe weather alerts for a US state.", "state: two-letter state code"),
		}},
	{server: "maps", product: "Google Maps", desc: "Google Maps Platform", container: "the map",
		extras: []extra{
			x("geocode", "Convert an address into geographic coordinates.", "address: address"),
			x("reverse_geocode", "Convert coordinates into a human-readable address.", "latitude: lat", "longitude: lng"),
			x("directions", "Get directions between an origin and a destination by car, transit, bicycle or on foot.", "origin: start", "destination: end", "mode: travel mode"),
			x("place_search", "Search for places such as restaurants or shops near a location.", "query: query", "location: center"),
			x("distance_matrix", "Compute travel distance and time between several origins and destinations.", "origins: origins", "destinations: destinations"),
		}},
	{server: "twilio", product: "Twilio", desc: "Twilio communications", container: "your account",
		resources: []resource{r("call", "calls", "to", "status"), r("phone number", "phone numbers", "number", "capabilities")},
		extras:    []extra{x("send_sms", "Send an SMS text message to a phone number.", "to: phone number", "body: text")}},
	{server: "openai", product: "OpenAI", desc: "OpenAI API", container: "your organization",
		resources: []resource{r("model", "models", "owner", "created"), r("fine-tuning job", "fine-tuning jobs", "base model", "status")},
		extras: []extra{
			x("create_image", "Generate an image from a text prompt with DALL-E.", "prompt: prompt", "size: size"),
			x("transcribe_audio", "Transcribe an audio file to text with Whisper.", "file: audio file"),
		}},
	{server: "airtable", product: "Airtable", desc: "Airtable bases", container: "a base",
		resources: []resource{r("record", "records", "fields", "view"), r("base", "bases", "name", "permission level"), r("table", "tables", "name", "fields")}},
	{server: "youtube", product: "YouTube", desc: "YouTube videos", container: "a channel",
		resources: []resource{r("video", "videos", "title", "view count"), r("playlist", "playlists", "title", "privacy")},
		extras:    []extra{x("get_transcript", "Get the transcript (captions) of a YouTube video.", "video_id: video", "language: language code")}},
	{server: "translate", product: "the translation service", desc: "Machine translation", container: "",
		extras: []extra{
			x("translate_text", "Translate text into a target language.", "text: text", "target_language: language code such as fr or de"),
			x("detect_language", "Detect the language of a text.", "text: text"),
		}},
}

// verbs are the CRUD operations generated for every resource.
var verbs = []struct {
	verb, desc string
	plural     bool
	params     []string
}{
	// Arguments: 1 product, 2 plural, 3 field one, 4 field two, 5 container,
	// 6 singular, 7 and 8 the fields as identifiers.
	{"list", "List %[2]s in %[5]s on %[1]s, with pagination and filters such as %[3]s.", true, []string{"%[7]s: filter by %[3]s", "limit: maximum number of results", "cursor: pagination cursor"}},
	{"get", "Get a single %[6]s from %[1]s by its ID, including its %[3]s and %[4]s.", false, []string{"id: the %[6]s ID"}},
	{"create", "Create a new %[6]s in %[5]s on %[1]s with a %[3]s and %[4]s.", false, []string{"%[7]s: %[3]s of the new %[6]s", "%[8]s: %[4]s"}},
	{"update", "Update an existing %[1]s %[6]s's %[3]s or %[4]s.", false, []string{"id: the %[6]s ID", "%[7]s: new %[3]s", "%[8]s: new %[4]s"}},
	{"delete", "Permanently delete a %[6]s from %[1]s.", false, []string{"id: the %[6]s ID"}},
	{"search", "Search %[1]s %[2]s by keyword or %[3]s.", true, []string{"query: search terms", "%[7]s: filter by %[3]s"}},
}

// syntheticDocs returns the synthetic corpus.
func syntheticDocs() []Doc {
	var out []Doc
	for _, d := range domains {
		out = append(out, domainDocs(d, d.server)...)
	}
	return out
}

func domainDocs(d domain, server string) []Doc {
	var out []Doc
	add := func(orig, desc string, params []string) {
		doc := Doc{Name: server + "." + orig, OriginalName: orig, Description: desc, Server: server, ServerDescription: d.desc}
		for _, p := range params {
			if p == "" {
				continue
			}
			name, pd, _ := strings.Cut(p, ": ")
			doc.Params = append(doc.Params, Param{Name: styled(d.style, strings.Fields(name)), Description: pd})
		}
		out = append(out, doc)
	}
	for _, res := range d.resources {
		for _, v := range verbs {
			noun := res.singular
			if v.plural {
				noun = res.plural
			}
			words := append([]string{v.verb}, strings.Fields(strings.ReplaceAll(noun, "-", " "))...)
			f1 := strings.ReplaceAll(res.f1, " ", "_")
			f2 := strings.ReplaceAll(res.f2, " ", "_")
			args := []any{d.product, res.plural, res.f1, res.f2, d.container, res.singular, f1, f2}
			var params []string
			for _, p := range v.params {
				if strings.Contains(p, "%") {
					p = fmt.Sprintf(p, args...)
				}
				params = append(params, p)
			}
			add(styled(d.style, words), fmt.Sprintf(v.desc, args...), params)
		}
	}
	for _, e := range d.extras {
		add(styled(d.style, strings.Split(e.name, "_")), e.desc, e.params)
	}
	return out
}

// styled joins words in a server's naming style.
func styled(style string, words []string) string {
	switch style {
	case "camel":
		var sb strings.Builder
		for i, w := range words {
			if i > 0 && w != "" {
				rs := []rune(w)
				rs[0] = unicode.ToUpper(rs[0])
				w = string(rs)
			}
			sb.WriteString(w)
		}
		return sb.String()
	case "kebab":
		return strings.Join(words, "-")
	}
	return strings.Join(words, "_")
}
