import type { FrontendConfig } from "./config.js";
import { type ServiceScaler, StaticScaler } from "./service-scaler.js";

export function createScaler(config: FrontendConfig): ServiceScaler {
  switch (config.scaling) {
    case "static":
      return new StaticScaler();
    default:
      return new StaticScaler();
  }
}
