-- Workspace access (seed 003, issue 16): the PostgreSQL twin of
-- migrations/sqlite/0006. API keys that carry a workspace policy, and grants
-- made to every identity of a workspace.
--
-- api_keys.workspace_policy (0/1): the key's admin, allow_servers and
-- deny_servers, with each server's default_access, decide what it may use;
-- no grant is needed. Keys made before this migration keep seed 000's
-- grants (0).
--
-- mcp_policies.workspace: a grant is to an agent (agent_id set, workspace
-- '') or to a workspace (workspace set, agent_id ''); the unique key of a
-- grant becomes (agent_id, workspace, server_id, tool_name).

ALTER TABLE api_keys ADD COLUMN workspace_policy INTEGER NOT NULL DEFAULT 0;

ALTER TABLE mcp_policies ADD COLUMN workspace TEXT COLLATE "C" NOT NULL DEFAULT '';
DROP INDEX idx_mcp_policies_agent_server_tool;
CREATE UNIQUE INDEX idx_mcp_policies_grantee_server_tool ON mcp_policies (agent_id, workspace, server_id, tool_name);
CREATE INDEX idx_mcp_policies_workspace ON mcp_policies (workspace);
