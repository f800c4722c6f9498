# Sourced by every preset: finds the engine, checks the model file, then starts the engine with
# the preset's values followed by the arguments given to the preset (later options win).
# Not a preset itself.

DECAPYBARA=${DECAPYBARA:-decapybara}
MODELS_DIR=${MODELS_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/decapybara/models}
# Where model files are published: a Hugging Face repository (HF_ENDPOINT works as for the
# Hugging Face tools).
MODEL_REPO=${MODEL_REPO:-decapybara/Qwen3.8-27B-mcapy}
HF_ENDPOINT=${HF_ENDPOINT:-https://huggingface.co}

dcp_run_preset () {
  model_path=$MODEL
  case $model_path in
    */*) ;;
    *) model_path=$MODELS_DIR/$MODEL ;;
  esac
  if [ ! -f "$model_path" ]; then
    name=$(basename "$model_path")
    echo "The model file $model_path is missing. Get it with the launcher, or with:" >&2
    echo "  mkdir -p '$(dirname "$model_path")'" >&2
    echo "  curl -L -C - -o '$model_path' '$HF_ENDPOINT/$MODEL_REPO/resolve/main/$name'" >&2
    exit 1
  fi
  exec "$DECAPYBARA" --model "$model_path" \
    --host "$HOST" --port "$PORT" \
    --context-mode "$CONTEXT_MODE" --conversations "$CONVERSATIONS" --context "$CONTEXT" \
    --kv-bits "$KV_BITS" --rope-scaling "$ROPE_SCALING" --activations "$ACTIVATIONS" \
    --speculator "$SPECULATOR" --draft-length "$DRAFT_LENGTH" \
    --prefill-policy "$PREFILL_POLICY" --loop-guard "$LOOP_GUARD" --vision "$VISION" \
    --ram-cache "$RAM_CACHE" --disk-cache "$DISK_CACHE" --keep-free "$KEEP_FREE" \
    --backend "$BACKEND" "$@"
}
