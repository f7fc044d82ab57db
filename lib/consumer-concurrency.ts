import { Aspects, AspectPriority, Token, type IAspect, type Stack } from 'aws-cdk-lib';
import { CfnEventSourceMapping } from 'aws-cdk-lib/aws-lambda';
import type { IConstruct } from 'constructs';

/**
 * The CDK context value that caps every queue consumer's concurrency (`-c consumerMaxConcurrency=2`,
 * or cdk.json's `context`): a new account's Lambda concurrency quota can be far below the sum of the
 * consumers' own maxConcurrency, and what they take the route functions cannot (docs/deploying.md,
 * section 1). Unset: each consumer keeps its own.
 */
export const CONSUMER_MAX_CONCURRENCY_CONTEXT = 'consumerMaxConcurrency';

/** An SQS event source's MaximumConcurrency: 2 to 1,000 (AWS::Lambda::EventSourceMapping ScalingConfig). */
export const SQS_MAX_CONCURRENCY_RANGE = { min: 2, max: 1000 } as const;

/** The cap the context asks for, or undefined; a value SQS mappings cannot take stops synthesis, naming it. */
export function consumerMaxConcurrency(stack: Stack): number | undefined {
  const raw: unknown = stack.node.tryGetContext(CONSUMER_MAX_CONCURRENCY_CONTEXT);
  if (raw === undefined || raw === null || raw === '') return undefined;
  // `-c name=2` arrives as the string "2"; cdk.json gives a number.
  const value = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d+$/.test(raw.trim()) ? Number(raw) : NaN;
  const { min, max } = SQS_MAX_CONCURRENCY_RANGE;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`context ${CONSUMER_MAX_CONCURRENCY_CONTEXT}=${JSON.stringify(raw)}: must be a whole number from ${min} to ${max} (an SQS event source's maximum concurrency)`);
  }
  return value;
}

/** Lowers every SQS event source mapping's MaximumConcurrency to `cap` (one above it only; a lower one stays). */
class CapConsumerConcurrency implements IAspect {
  constructor(private readonly cap: number) {}

  visit(node: IConstruct): void {
    if (!(node instanceof CfnEventSourceMapping)) return;
    const scaling = node.scalingConfig;
    if (scaling === undefined || Token.isUnresolved(scaling)) return;
    const own = (scaling as CfnEventSourceMapping.ScalingConfigProperty).maximumConcurrency;
    if (typeof own === 'number' && own > this.cap) node.scalingConfig = { maximumConcurrency: this.cap };
  }
}

/** Applies the context's cap, if any, to every consumer of the stack (those added later included: aspects run at synthesis). */
export function capConsumerConcurrency(stack: Stack): void {
  const cap = consumerMaxConcurrency(stack);
  if (cap !== undefined) Aspects.of(stack).add(new CapConsumerConcurrency(cap), { priority: AspectPriority.MUTATING });
}
