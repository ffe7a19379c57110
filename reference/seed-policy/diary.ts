/**
 * `/mempalace-diary [topic]`: ask the model to write its diary entry (DIARY-01). The entry has to be
 * composed by the LLM, so this is a manual command that starts a turn; session_shutdown fires too
 * late to drive one.
 */
export const DIARY_COMMAND = "mempalace-diary";
export const DIARY_DESCRIPTION = "Write this session's MemPalace diary entry (AAAK). Usage: /mempalace-diary [topic]";

export function diaryPrompt(agentName: string, topic?: string): string {
  const lines = [
    "Please write your MemPalace diary entry for this session now.",
    `Call the mempalace_diary_write tool once, with agent_name="${agentName}" and an entry in AAAK format (compressed, entity-coded, emotion-marked; call mempalace_get_aaak_spec first if you need the dialect) that summarises this session: what was worked on, the decisions made and why, and what is still open.`,
  ];
  if (topic) lines.push(`Focus the entry on this topic: ${topic}. Pass topic="${topic}" as well.`);
  return lines.join("\n");
}

/** The topic as typed, whitespace collapsed; undefined when empty. */
export function diaryTopic(args: string | undefined): string | undefined {
  const topic = (args ?? "").split(/\s+/).filter(Boolean).join(" ");
  return topic || undefined;
}
