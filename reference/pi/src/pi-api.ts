/**
 * The slice of pi's ExtensionAPI (pi 1.x, `@earendil-works/pi-coding-agent`) this bridge uses,
 * declared structurally: pi supplies the real object at load, and the copy type-checks without
 * pulling pi-coding-agent and its provider SDKs into its dev dependencies.
 */
export interface TextBlock {
  type: string;
  [key: string]: unknown;
}

export interface ToolOutcome {
  content: Record<string, unknown>[];
  details: unknown;
  isError?: boolean;
}

export interface ToolDefinition {
  name: string;
  label: string;
  description: string;
  parameters: unknown;
  execute(toolCallId: string, params: Record<string, unknown>, signal?: AbortSignal, onUpdate?: unknown, ctx?: unknown): Promise<ToolOutcome>;
}

export interface CustomMessage {
  customType: string;
  content: string;
  display: boolean;
  details?: unknown;
}

export interface ExecOptions {
  timeout?: number;
  signal?: AbortSignal;
  cwd?: string;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  code: number;
  killed: boolean;
}

export interface SessionStartEvent {
  type: "session_start";
  reason?: string;
}

export interface ExtensionAPI {
  on(event: "session_start", handler: (event: SessionStartEvent, ctx: unknown) => unknown): unknown;
  on(event: "before_agent_start", handler: (event: unknown, ctx: unknown) => Promise<{ message: CustomMessage } | undefined>): unknown;
  on(event: "agent_settled" | "session_shutdown", handler: (event: unknown, ctx: unknown) => unknown): unknown;
  registerTool(tool: ToolDefinition): void;
  registerCommand(name: string, options: { description: string; handler: (args: string, ctx: unknown) => Promise<void> }): void;
  sendMessage(message: CustomMessage, options?: { deliverAs?: "steer" | "followUp" | "nextTurn"; triggerTurn?: boolean }): void;
  sendUserMessage(content: string, options?: { deliverAs?: "steer" | "followUp" }): void;
  exec(command: string, args: string[], options?: ExecOptions): Promise<ExecResult>;
}
