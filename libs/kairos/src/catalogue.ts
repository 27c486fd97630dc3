/**
 * The instance-type catalogue as a file: the types' names, prices and limits, and the profile table their
 * latencies come from (by path; the shared tables are read where they are, never copied). Validated here,
 * once; `buildCatalogue` joins the spec with the parsed table and refuses a type the table does not know.
 */
import { z } from "zod";
import { type InstanceType, type LatencyProfile, parseProfileCsv } from "./instance-types.js";

export const instanceTypeSpecSchema = z.strictObject({
  name: z.string().trim().min(1, "name must not be empty"),
  pricePerHour: z.number().positive(),
  maxCount: z.number().int().nonnegative(),
});

/** An instance type's name, price and limit, without its profiles (the allocator's price list is a list of them). */
export type InstanceTypeSpec = z.infer<typeof instanceTypeSpecSchema>;

/** One or more types, names distinct. */
export const instanceTypeListSchema = z
  .array(instanceTypeSpecSchema)
  .min(1)
  .refine((ts) => new Set(ts.map((t) => t.name)).size === ts.length, "instance type names must be distinct");

export const catalogueSpecSchema = z.strictObject({
  /** A profile table (../shared/profiles/kairos-aws-4types.csv format), beside the file or in the profiles directory. */
  profiles: z.string().min(1),
  types: instanceTypeListSchema,
});

export type CatalogueSpec = z.infer<typeof catalogueSpecSchema>;

/** The catalogue's types with their profiles, in the spec's order. */
export function buildCatalogue(spec: CatalogueSpec, profileCsv: string): InstanceType[] {
  const table = parseProfileCsv(profileCsv);
  return spec.types.map((t) => {
    const profiles: Map<string, LatencyProfile> | undefined = table.get(t.name);
    if (profiles === undefined) {
      throw new Error(
        `instance type ${t.name}: the profile table ${spec.profiles} has no rows for it (it has: ${[...table.keys()].join(", ")})`,
      );
    }
    return { ...t, profiles };
  });
}
